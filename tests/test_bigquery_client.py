"""How the BigQuery family makes its client from the warehouse URL (no server needed: a client
is only configured here; the conformance suite runs the full cycle on the emulator):
``api_endpoint`` points it at an endpoint, ``anonymous=true`` gives it anonymous credentials,
``credentials_path`` a service-account key, the URL's dataset is the default dataset, and the
engine is given that client with the parameters only ctxprec reads removed from its URL."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

pytest.importorskip("google.cloud.bigquery", reason="the [bigquery] extra")
pytest.importorskip("sqlalchemy_bigquery", reason="the [bigquery] extra")

from ctxprec_ops.warehouse.dialects import for_dialect  # noqa: E402
from ctxprec_ops.warehouse.engine import display_url, get_engine, release_sqlite_files  # noqa: E402

ENDPOINT = "http://127.0.0.1:9999"


def test_an_endpoint_and_anonymous_credentials_from_the_url():
    from google.auth.credentials import AnonymousCredentials

    family = for_dialect("bigquery")
    url = sa.engine.make_url(f"bigquery://proj-1/analytics?api_endpoint={ENDPOINT}&anonymous=true&location=EU")
    client = family.bigquery_client(url)
    try:
        assert client.project == "proj-1" and client.location == "EU"
        assert isinstance(client._credentials, AnonymousCredentials)
        assert client._connection.API_BASE_URL == ENDPOINT
        dataset = client.default_query_job_config.default_dataset
        assert (dataset.project, dataset.dataset_id) == ("proj-1", "analytics")
    finally:
        client.close()
    engine_url = family.engine_url(url)
    assert dict(engine_url.query) == {"user_supplied_client": "true"}
    assert (engine_url.host, engine_url.database) == ("proj-1", "analytics")


def test_a_service_account_key_file_from_the_url(tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    pem = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        .decode()
    )
    key = tmp_path / "key.json"
    key.write_text(
        json.dumps(
            {
                "type": "service_account", "project_id": "proj-1", "private_key_id": "k1", "private_key": pem,
                "client_email": "scorer@proj-1.iam.gserviceaccount.com", "client_id": "1",
                "token_uri": "https://oauth2.googleapis.com/token",
            }
        )
    )  # fmt: skip
    url = sa.engine.make_url(f"bigquery://proj-1/analytics?api_endpoint={ENDPOINT}&credentials_path={key}")
    client = for_dialect("bigquery").bigquery_client(url)
    try:
        assert client._credentials.service_account_email == "scorer@proj-1.iam.gserviceaccount.com"
    finally:
        client.close()


def test_without_client_parameters_the_url_goes_to_sqlalchemy_bigquery_unchanged():
    family = for_dialect("bigquery")
    url = sa.engine.make_url("bigquery://proj-1/analytics?location=EU")
    assert not family.builds_client(url)
    assert family.engine_url(url) == url
    assert "connect_args" not in family.engine_arguments(url)


def test_the_product_engine_is_given_the_client_and_a_url_it_accepts():
    url = f"bigquery://proj-1/analytics?api_endpoint={ENDPOINT}&anonymous=true"
    try:
        engine = get_engine(url)  # never connects
        assert engine.dialect.name == "bigquery"
        assert dict(engine.url.query) == {"user_supplied_client": "true"}
        assert ENDPOINT in display_url(url)  # an endpoint is no secret: messages may name it
    finally:
        release_sqlite_files()
