"""A realistic sample warehouse for ``ctxprec demo``: a support-bot's retrieval and chat logs.

``create_sample_warehouse(url)`` (re)creates ``retrieval_logs`` and ``conversation_logs`` with a
few hundred rows per UTC day over ``days`` days. Each row is a support question on one of a dozen
topics; the retriever returns 3-8 passages mixing on-topic passages (which share vocabulary with
the expected answer) and distractors from other topics. Most days rank the useful passages first;
two or three "dip" days push them down and add distractors, so the trend shows a regression. A
few malformed rows per sample (null / non-JSON / empty context, a non-string node, an empty
expected answer) exercise the failure path. The same seed always gives the same rows.

Every retrieval also carries gold labels (``retrieved_ids``, ``relevant_ids``: stable chunk ids,
see ``passage_ids``), so the demo scores ``label_contextual_precision`` too and ``ctxprec
calibrate`` can measure the lexical judge against them.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from .secrets import redact_url

__all__ = ["SampleInfo", "create_sample_warehouse", "TOPICS", "MALFORMED_KINDS", "passage_ids"]

#: the kinds of bad rows the sample contains (each at least once when days >= 1)
MALFORMED_KINDS = (
    "null_context",
    "non_json_context",
    "empty_context",
    "non_string_node",
    "empty_expected_output",
)
#: bad conversations: unparsable turns, no retrieval at all, no expected outcome
MALFORMED_CONVERSATION_KINDS = ("non_json_turns", "no_retrieval", "empty_expected_outcome")


@dataclass(frozen=True)
class QA:
    questions: tuple[str, ...]
    answer: str
    support: tuple[str, ...]  # passages that state what the answer relies on


@dataclass(frozen=True)
class Topic:
    name: str
    qas: tuple[QA, ...]
    background: tuple[str, ...]  # on-topic but not answer-bearing


TOPICS: tuple[Topic, ...] = (
    Topic(
        "billing",
        (
            QA(
                (
                    "Why was I charged twice this month?",
                    "I see two charges on my card for the same invoice",
                    "duplicate charge on my credit card statement",
                ),
                "A duplicate charge is usually a pending authorization hold that the bank releases within "
                "3-5 business days; if both charges settle, billing support refunds the duplicate invoice.",
                (
                    "Pending authorization holds appear on a card statement like a charge but are released by "
                    "the bank within 3-5 business days.",
                    "If a duplicate charge settles, contact billing support with the invoice number and the "
                    "duplicate payment is refunded to the original card.",
                    "Each invoice is charged once; a second line for the same invoice amount is normally an "
                    "authorization hold, not a settled charge.",
                ),
            ),
            QA(
                (
                    "How do I update the credit card used for billing?",
                    "change payment method",
                    "where can I replace my expired card",
                ),
                "Open Settings > Billing > Payment method, click Replace card and enter the new card; the "
                "next invoice is charged to the new card automatically.",
                (
                    "To change the payment method, go to Settings > Billing > Payment method and click Replace card.",
                    "After you replace the card, the next invoice is charged to the new card automatically; "
                    "past invoices are not re-charged.",
                    "Expired cards are flagged on the Billing page seven days before the next invoice date.",
                ),
            ),
            QA(
                ("Can I get invoices with my company VAT number?", "add VAT ID to invoice", "tax number on invoices"),
                "Yes: add the VAT number under Settings > Billing > Tax details; it is printed on every "
                "invoice issued after you save it, and EU reverse charge is applied automatically.",
                (
                    "Company details and the VAT number are edited under Settings > Billing > Tax details.",
                    "A VAT number is printed on every invoice issued after it is saved; earlier invoices are "
                    "not reissued.",
                    "For EU customers with a valid VAT number, reverse charge is applied automatically.",
                ),
            ),
        ),
        (
            "Billing runs on the first day of each billing cycle in the account's time zone.",
            "Annual plans are billed up front and receive two months free compared with monthly billing.",
        ),
    ),
    Topic(
        "password_reset",
        (
            QA(
                ("I forgot my password, how do I reset it?", "reset password", "can't log in, forgot password"),
                "Click 'Forgot password' on the sign-in page and enter your email; the reset link is valid "
                "for 30 minutes and sets a new password after you confirm it.",
                (
                    "On the sign-in page, click 'Forgot password' and enter the email address of the account.",
                    "The password reset link expires after 30 minutes; request a new reset link if it expired.",
                    "After following the reset link, enter and confirm the new password to sign in.",
                ),
            ),
            QA(
                ("The password reset email never arrived", "no reset email received", "didn't get password reset link"),
                "Check the spam folder and that the email address matches the account; reset emails come "
                "from no-reply@acme.example and arrive within 5 minutes, otherwise ask support to resend.",
                (
                    "Password reset emails are sent from no-reply@acme.example and normally arrive within 5 minutes.",
                    "If the reset email did not arrive, check the spam folder and confirm the email address "
                    "matches the account.",
                    "Support can resend the password reset email after verifying the account owner.",
                ),
            ),
        ),
        (
            "Passwords must be at least 12 characters and cannot reuse the last five passwords.",
            "Admins can force a password reset for every member from the Security page.",
        ),
    ),
    Topic(
        "api_rate_limits",
        (
            QA(
                (
                    "What are the API rate limits?",
                    "how many requests per minute can I make",
                    "API throttling limits for my plan",
                ),
                "The API allows 600 requests per minute per token on the Standard plan and 3000 on "
                "Enterprise; exceeding it returns HTTP 429 with a Retry-After header.",
                (
                    "Rate limits are counted per API token: 600 requests per minute on Standard, 3000 "
                    "requests per minute on Enterprise.",
                    "A request over the rate limit gets HTTP 429 Too Many Requests with a Retry-After header "
                    "in seconds.",
                    "The X-RateLimit-Remaining header shows how many requests are left in the current minute.",
                ),
            ),
            QA(
                (
                    "I keep getting 429 errors from the API",
                    "HTTP 429 Too Many Requests",
                    "how to handle rate limit errors",
                ),
                "A 429 means the token exceeded its per-minute rate limit: wait for the Retry-After seconds "
                "and retry with exponential backoff, or spread requests across the minute.",
                (
                    "HTTP 429 is returned when a token exceeds its per-minute rate limit.",
                    "Clients should honour the Retry-After header and retry with exponential backoff and jitter.",
                    "Batch endpoints count as one request and help stay under the rate limit.",
                ),
            ),
        ),
        (
            "API tokens are created under Settings > Developer > Tokens and can be scoped per project.",
            "The API is versioned by date; pin a version with the Api-Version header.",
        ),
    ),
    Topic(
        "refunds",
        (
            QA(
                ("Can I get a refund?", "refund policy", "I want my money back for the annual plan"),
                "Monthly plans can be refunded within 14 days of the charge and annual plans within 30 "
                "days; refunds go back to the original payment method within 5-10 business days.",
                (
                    "Refunds are available within 14 days of a monthly charge and within 30 days of an annual charge.",
                    "Refunds are returned to the original payment method and take 5-10 business days to appear.",
                    "To request a refund, open the invoice and choose Request refund, or contact billing support.",
                ),
            ),
            QA(
                ("How long does a refund take to show up?", "refund not received yet", "when will I see my refund"),
                "Once approved, a refund reaches the original payment method in 5-10 business days; the "
                "invoice shows status Refunded as soon as it is approved.",
                (
                    "Approved refunds reach the original payment method in 5-10 business days, depending on the bank.",
                    "An invoice shows the status Refunded as soon as the refund is approved.",
                ),
            ),
        ),
        (
            "Credits from downgrades are kept on the account and applied to the next invoice.",
            "Refunds are not available for usage-based overage charges.",
        ),
    ),
    Topic(
        "shipping",
        (
            QA(
                ("When will my order ship?", "shipping time for hardware orders", "delivery estimate"),
                "Hardware orders ship within 2 business days from our warehouse; standard delivery takes "
                "3-5 business days and express delivery 1-2 business days.",
                (
                    "Hardware orders leave the warehouse within 2 business days of payment.",
                    "Standard delivery takes 3-5 business days; express delivery takes 1-2 business days.",
                    "A tracking number is emailed as soon as the order ships from the warehouse.",
                ),
            ),
            QA(
                ("Do you ship internationally?", "international shipping", "can you deliver to Canada"),
                "Yes, we ship to 40 countries; international delivery takes 7-14 business days and "
                "customs duties are paid by the recipient.",
                (
                    "We ship hardware to 40 countries; the checkout lists every supported country.",
                    "International delivery takes 7-14 business days depending on customs.",
                    "Customs duties and import taxes on international orders are paid by the recipient.",
                ),
            ),
        ),
        (
            "Orders can be cancelled free of charge until they ship.",
            "Returned hardware must be in its original packaging.",
        ),
    ),
    Topic(
        "sso",
        (
            QA(
                ("How do I set up SAML single sign-on?", "configure SSO with Okta", "SAML SSO setup"),
                "On the Enterprise plan, open Settings > Security > SSO, upload your identity provider's "
                "SAML metadata XML and map the email attribute; then test the SSO login before enforcing it.",
                (
                    "SAML single sign-on is available on the Enterprise plan under Settings > Security > SSO.",
                    "Upload the identity provider's SAML metadata XML (Okta, Azure AD, Google) and map the "
                    "email attribute.",
                    "Use Test SSO login to check the SAML configuration before enforcing SSO for all members.",
                ),
            ),
            QA(
                (
                    "SSO login fails with an invalid signature error",
                    "SAML invalid signature",
                    "Okta SSO error after certificate rotation",
                ),
                "An invalid signature error means the identity provider's signing certificate changed: "
                "upload the new SAML metadata XML or certificate under Settings > Security > SSO.",
                (
                    "'Invalid signature' during SAML SSO means the response was signed with a certificate we "
                    "do not have.",
                    "After the identity provider rotates its signing certificate, upload the new SAML metadata "
                    "XML under Settings > Security > SSO.",
                ),
            ),
        ),
        (
            "SCIM provisioning creates and removes members automatically from your identity provider.",
            "Guests cannot sign in with SSO and keep using email and password.",
        ),
    ),
    Topic(
        "data_export",
        (
            QA(
                ("How do I export all my data?", "export account data", "download a full data export"),
                "Admins can start a full export under Settings > Data > Export; the archive of CSV and "
                "JSON files is emailed as a download link valid for 7 days.",
                (
                    "A full data export is started by an admin from Settings > Data > Export.",
                    "The export archive contains CSV and JSON files for every project.",
                    "When the export is ready, a download link is emailed; the link is valid for 7 days.",
                ),
            ),
            QA(
                (
                    "Can I schedule a recurring export to S3?",
                    "automatic export to S3 bucket",
                    "nightly export to our data warehouse",
                ),
                "Yes, on Enterprise you can schedule a daily or weekly export to an S3 bucket under "
                "Settings > Data > Scheduled exports, using a bucket policy that grants our role write access.",
                (
                    "Scheduled exports run daily or weekly and write to an S3 bucket you own.",
                    "Configure scheduled exports under Settings > Data > Scheduled exports on the Enterprise plan.",
                    "The S3 bucket policy must grant our export role write access to the bucket.",
                ),
            ),
        ),
        (
            "Deleted projects are kept for 30 days and can be restored by an admin.",
            "Exports never include API tokens or passwords.",
        ),
    ),
    Topic(
        "two_factor",
        (
            QA(
                ("How do I enable two-factor authentication?", "turn on 2FA", "set up an authenticator app"),
                "Go to Profile > Security > Two-factor authentication, scan the QR code with an "
                "authenticator app and enter the 6-digit code; save the recovery codes shown afterwards.",
                (
                    "Two-factor authentication is enabled under Profile > Security > Two-factor authentication.",
                    "Scan the QR code with an authenticator app and confirm with the 6-digit code.",
                    "After enabling two-factor authentication, store the ten recovery codes somewhere safe.",
                ),
            ),
            QA(
                (
                    "I lost my phone and can't get my 2FA code",
                    "lost authenticator device",
                    "locked out by two-factor authentication",
                ),
                "Sign in with one of your recovery codes and re-enroll the authenticator app; without "
                "recovery codes an admin or support must reset two-factor authentication after verifying you.",
                (
                    "Each recovery code can be used once instead of the 6-digit authenticator code.",
                    "After signing in with a recovery code, re-enroll two-factor authentication on the new phone.",
                    "Without recovery codes, an admin or support resets two-factor authentication after "
                    "verifying the account owner.",
                ),
            ),
        ),
        (
            "Admins can require two-factor authentication for every member of the workspace.",
            "SMS codes are not supported; use an authenticator app or a security key.",
        ),
    ),
    Topic(
        "webhooks",
        (
            QA(
                ("How do I verify webhook signatures?", "validate webhook payload", "webhook signature header"),
                "Each webhook carries an X-Signature header: compute the HMAC-SHA256 of the raw request "
                "body with your webhook secret and compare it in constant time.",
                (
                    "Every webhook request includes an X-Signature header with an HMAC-SHA256 signature.",
                    "Compute HMAC-SHA256 over the raw request body using the webhook secret and compare in "
                    "constant time.",
                    "The webhook secret is shown once when the webhook endpoint is created.",
                ),
            ),
            QA(
                ("Why are my webhooks not being delivered?", "webhook retries", "missing webhook events"),
                "Webhooks are retried for 24 hours with exponential backoff when your endpoint does not "
                "answer 2xx within 10 seconds; after that the endpoint is disabled and admins are emailed.",
                (
                    "A webhook delivery succeeds when the endpoint answers 2xx within 10 seconds.",
                    "Failed webhook deliveries are retried with exponential backoff for 24 hours.",
                    "An endpoint that keeps failing for 24 hours is disabled and admins receive an email.",
                ),
            ),
        ),
        (
            "Webhook events are listed under Settings > Developer > Webhooks with their payload schema.",
            "Event ordering is not guaranteed; use the event timestamp.",
        ),
    ),
    Topic(
        "account_deletion",
        (
            QA(
                ("How do I delete my account?", "close my account permanently", "remove account and data"),
                "The account owner can delete the account under Settings > Account > Delete account; data "
                "is kept for 30 days in case you change your mind and then permanently erased.",
                (
                    "Only the account owner can delete the account, from Settings > Account > Delete account.",
                    "After deletion, data is kept for 30 days and can be restored, then it is permanently erased.",
                    "Cancel the subscription before deleting the account to avoid another invoice.",
                ),
            ),
        ),
        (
            "Members can leave a workspace at any time without deleting their personal account.",
            "Deleting an account does not delete exported files you already downloaded.",
        ),
    ),
)

#: passages that match nothing (what a weak retriever also returns)
_NOISE = (
    "Our offices are closed on public holidays; the status page lists planned maintenance.",
    "Welcome to the help center! Browse the categories on the left to get started.",
    "The mobile app is available for iOS 16 and Android 12 or later.",
    "Release notes are published every Tuesday on the company blog.",
    "Keyboard shortcuts: press ? anywhere in the app to see the full list.",
    "Dark mode can be enabled from the appearance menu in your profile.",
)

_PREFIXES = ("", "", "", "Hi, ", "Hello! ", "Quick question: ", "Urgent: ", "hey - ")
_SUFFIXES = ("", "", "", "?", " thanks", " - please help", " (asking for my team)")
_FOLLOW_UPS = (
    "And what if that doesn't work?",
    "Thanks. Is there anything else I should know?",
    "Ok, where exactly do I find that?",
    "Does this apply to the Enterprise plan too?",
)


@dataclass
class SampleInfo:
    """What ``create_sample_warehouse`` wrote (for the demo's printout and the tests)."""

    url: str  # redacted
    source_table: str
    conversation_table: str
    partitions: list[str]
    retrieval_rows: dict[str, int]
    conversation_rows: dict[str, int]
    dip_days: list[str]
    malformed: dict[str, list[Any]] = field(default_factory=dict)  # kind -> retrieval ids
    malformed_conversations: dict[str, list[Any]] = field(default_factory=dict)
    seed: int = 0

    @property
    def total_retrievals(self) -> int:
        return sum(self.retrieval_rows.values())

    @property
    def total_conversations(self) -> int:
        return sum(self.conversation_rows.values())


def _dip_indices(days: int) -> list[int]:
    """Two or three consecutive days after a baseline week (so a regression rule can see them)."""
    if days < 4:
        return [days - 1] if days >= 2 else []
    width = 3 if days >= 10 else 2
    start = min(max(days // 2, min(7, days - width - 1)), days - width - 1)  # >= 1 recovery day
    return list(range(start, start + width))


def _event_times(rng: random.Random, day: date, n: int) -> list[datetime]:
    """``n`` naive-UTC instants within ``day``: a daytime-heavy spread plus a few at the edges."""
    base = datetime.combine(day, time(0, 0))
    out: list[datetime] = []
    edges = min(n, rng.randint(2, 4))
    for i in range(edges):  # a few right after midnight and right before the next one
        if i % 2 == 0:
            out.append(base + timedelta(seconds=rng.uniform(0, 45)))
        else:
            out.append(base + timedelta(days=1) - timedelta(seconds=rng.uniform(0.001, 45)))
    for _ in range(n - edges):
        hour = min(23.999, max(0.0, rng.gauss(14, 5)))  # busier in the afternoon (UTC)
        out.append(base + timedelta(seconds=hour * 3600 + rng.uniform(0, 1)))
    out.sort()
    return out


def _other_topics_passages(rng: random.Random, topic: Topic, k: int) -> list[str]:
    others = [t for t in TOPICS if t.name != topic.name]
    out: dict[str, None] = {}  # ordered set: no exact duplicate node in one list
    while len(out) < k:
        t = rng.choice(others)
        if rng.random() < 0.25:
            out[rng.choice(_NOISE)] = None
        elif rng.random() < 0.5:
            out[rng.choice(t.background)] = None
        else:
            out[rng.choice(rng.choice(t.qas).support)] = None
    return list(out)


_PASSAGE_IDS: dict[str, str] = {}


def passage_ids() -> dict[str, str]:
    """Passage text -> its stable chunk id (``billing-q1-s2``: topic, question set, support
    passage; ``billing-bg1``: background; ``noise-3``), the ids of the gold labels."""
    if not _PASSAGE_IDS:
        for topic in TOPICS:
            for qi, qa in enumerate(topic.qas, start=1):
                for si, text in enumerate(qa.support, start=1):
                    _PASSAGE_IDS.setdefault(text, f"{topic.name}-q{qi}-s{si}")
            for bi, text in enumerate(topic.background, start=1):
                _PASSAGE_IDS.setdefault(text, f"{topic.name}-bg{bi}")
        for ni, text in enumerate(_NOISE, start=1):
            _PASSAGE_IDS.setdefault(text, f"noise-{ni}")
    return _PASSAGE_IDS


def _rank(rng: random.Random, relevant: list[str], distractors: list[str], quality: str) -> list[str]:
    rel, dis = relevant[:], distractors[:]
    rng.shuffle(rel)
    rng.shuffle(dis)
    if quality == "good":  # useful nodes first, maybe one distractor slipped in at rank 2
        nodes = rel + dis
        if len(rel) > 1 and dis and rng.random() < 0.3:
            nodes.insert(1, nodes.pop(len(rel)))
        return nodes
    if quality == "bad":  # useful nodes buried at the bottom
        return dis + rel
    nodes = rel + dis
    rng.shuffle(nodes)
    return nodes


#: (good, mixed, bad, none) ranking mix and extra distractors, per kind of day
_NORMAL = ((0.66, 0.24, 0.06, 0.04), 0)
_DIP = ((0.22, 0.33, 0.33, 0.12), 2)


def _retrieval(rng: random.Random, dip: bool) -> dict[str, Any]:
    topic = rng.choice(TOPICS)
    qa = rng.choice(topic.qas)
    question = rng.choice(_PREFIXES) + rng.choice(qa.questions) + rng.choice(_SUFFIXES)
    mix, extra = _DIP if dip else _NORMAL
    drift = rng.uniform(-0.03, 0.03)
    quality = rng.choices(("good", "mixed", "bad", "none"), weights=(mix[0] + drift, mix[1], mix[2], mix[3]))[0]
    n = rng.randint(3, 8)
    if quality == "none":
        relevant: list[str] = []
    else:
        relevant = rng.sample(qa.support, k=min(len(qa.support), rng.randint(1, 3), n - 1))
    distractors = _other_topics_passages(rng, topic, n - len(relevant) + extra)
    if rng.random() < 0.3:
        distractors[-1] = rng.choice(topic.background)  # on-topic, yet not answer-bearing
    nodes = _rank(rng, relevant, distractors, quality)
    ids = passage_ids()
    good_answer = quality == "good" or rng.random() < 0.4
    actual: str | None = qa.answer if good_answer else "I'm not sure; please check the help center or contact support."
    if rng.random() < 0.05:
        actual = None
    return {
        "input": question,
        "actual_output": actual,
        "expected_output": qa.answer,
        "retrieval_context": json.dumps(nodes),
        # gold labels: the chunk ids retrieved, and every chunk that supports the answer
        "retrieved_ids": json.dumps([ids[n] for n in nodes]),
        "relevant_ids": json.dumps([ids[n] for n in qa.support]),
        "_topic": topic,
        "_qa": qa,
    }


def _malform(rng: random.Random, row: dict[str, Any], kind: str) -> None:
    if kind == "null_context":
        row["retrieval_context"] = None
    elif kind == "non_json_context":
        row["retrieval_context"] = "['Passwords must be at least 12 characters', 'Billing runs monthly'"
    elif kind == "empty_context":
        row["retrieval_context"] = "[]"
    elif kind == "non_string_node":
        nodes = json.loads(row["retrieval_context"])
        nodes.insert(rng.randint(0, len(nodes)), {"text": nodes[0], "score": 0.87})
        nodes.insert(rng.randint(0, len(nodes)), 42)
        row["retrieval_context"] = json.dumps(nodes)
    elif kind == "empty_expected_output":
        row["expected_output"] = ""
    else:  # pragma: no cover
        raise ValueError(kind)


def _conversation(rng: random.Random, dip: bool) -> tuple[list[dict[str, Any]], str]:
    """A chat about one issue: the first question, follow-ups on it, sometimes a side question on
    the same topic. The expected outcome is the answer to the main issue, so the side question's
    passages are (rightly) not useful for it."""
    topic = rng.choice(TOPICS)
    main = rng.choice(topic.qas)
    units = rng.randint(2, 4)
    mix, extra = _DIP if dip else _NORMAL
    turns: list[dict[str, Any]] = []
    for i in range(units):
        side = i > 0 and len(topic.qas) > 1 and rng.random() < 0.25
        qa = rng.choice([q for q in topic.qas if q is not main]) if side else main
        if i == 0:
            user = rng.choice(_PREFIXES) + rng.choice(qa.questions)
        elif side or rng.random() < 0.5:
            user = rng.choice(qa.questions)
        else:
            user = rng.choice(_FOLLOW_UPS)
        turns.append({"role": "user", "content": user, "retrieval_context": None})
        if i > 0 and rng.random() < 0.15:  # a chit-chat answer with no retrieval
            turns.append({"role": "assistant", "content": "Happy to help with that.", "retrieval_context": []})
            continue
        quality = rng.choices(("good", "mixed", "bad", "none"), weights=mix)[0]
        n = rng.randint(2, 5)
        k = min(len(qa.support), rng.randint(1, 2), n - 1)
        relevant = [] if quality == "none" else rng.sample(qa.support, k=k)
        distractors = _other_topics_passages(rng, topic, max(1, n - len(relevant) + extra))
        turns.append(
            {"role": "assistant", "content": qa.answer, "retrieval_context": _rank(rng, relevant, distractors, quality)}
        )
    return turns, main.answer


def _engine(url_or_engine: str | Engine) -> Engine:
    from .warehouse.engine import get_engine  # WAL + busy timeout on SQLite, psycopg 3 for PG

    return get_engine(url_or_engine)


def _tables(metadata: sa.MetaData, source_table: str, conversation_table: str) -> tuple[sa.Table, sa.Table]:
    logs = sa.Table(
        source_table,
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("event_time", sa.DateTime(timezone=False), nullable=False, index=True),
        sa.Column("input", sa.Text, nullable=False),
        sa.Column("actual_output", sa.Text, nullable=True),
        sa.Column("expected_output", sa.Text, nullable=True),
        sa.Column("retrieval_context", sa.Text, nullable=True),  # JSON text
        sa.Column("retrieved_ids", sa.Text, nullable=True),  # JSON text: chunk ids, ranked
        sa.Column("relevant_ids", sa.Text, nullable=True),  # JSON text: ids of the chunks that answer
    )
    convs = sa.Table(
        conversation_table,
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("event_time", sa.DateTime(timezone=False), nullable=False, index=True),
        sa.Column("turns", sa.Text, nullable=True),  # JSON text
        sa.Column("expected_outcome", sa.Text, nullable=True),
    )
    return logs, convs


def create_sample_warehouse(
    url_or_engine: str | Engine,
    *,
    days: int = 14,
    rows_per_day: tuple[int, int] = (250, 400),
    conversations_per_day: tuple[int, int] = (20, 40),
    seed: int = 20261128,
    end_date: date | str | None = None,
    source_table: str = "retrieval_logs",
    conversation_table: str = "conversation_logs",
) -> SampleInfo:
    """(Re)create the two sample tables and fill them; returns what was written.

    ``end_date`` is the last partition (default: yesterday, UTC); partitions are the ``days``
    UTC days ending there. Existing tables of those names are dropped first. ``event_time`` is
    stored as naive UTC. Deterministic for a given ``seed`` and ``end_date``.
    """
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days}")
    lo, hi = rows_per_day
    clo, chi = conversations_per_day
    if not (1 <= lo <= hi) or not (0 <= clo <= chi):
        raise ValueError("rows_per_day / conversations_per_day must be (low, high) with 1 <= low <= high")
    if end_date is None:
        end = datetime.now(UTC).date() - timedelta(days=1)
    elif isinstance(end_date, str):
        end = date.fromisoformat(end_date)
    else:
        end = end_date
    day_list = [end - timedelta(days=days - 1 - i) for i in range(days)]
    dips = set(_dip_indices(days))
    rng = random.Random(seed)

    info = SampleInfo(
        url="",
        source_table=source_table,
        conversation_table=conversation_table,
        partitions=[d.isoformat() for d in day_list],
        retrieval_rows={},
        conversation_rows={},
        dip_days=[day_list[i].isoformat() for i in sorted(dips)],
        malformed={k: [] for k in MALFORMED_KINDS},
        malformed_conversations={k: [] for k in MALFORMED_CONVERSATION_KINDS},
        seed=seed,
    )

    log_rows: list[dict[str, Any]] = []
    conv_rows: list[dict[str, Any]] = []
    next_id = 1
    next_conv = 1
    for di, day in enumerate(day_list):
        dip = di in dips
        n = rng.randint(lo, hi)
        times = _event_times(rng, day, n)
        # each malformed kind shows up at least once: kind i lands on day i (mod days)
        forced = [k for i, k in enumerate(MALFORMED_KINDS) if i % days == di]
        bad_slots = {rng.randrange(n): k for k in forced}
        for j, t in enumerate(times):
            row = _retrieval(rng, dip)
            kind = bad_slots.get(j)
            if kind is None and rng.random() < 0.006:
                kind = rng.choice(MALFORMED_KINDS)
            if kind is not None:
                _malform(rng, row, kind)
                info.malformed[kind].append(next_id)
            row.pop("_topic")
            row.pop("_qa")
            log_rows.append({"id": next_id, "event_time": t, **row})
            next_id += 1
        info.retrieval_rows[day.isoformat()] = n

        m = rng.randint(clo, chi)
        ctimes = _event_times(rng, day, m) if m else []
        forced_c = [k for i, k in enumerate(MALFORMED_CONVERSATION_KINDS) if i % days == di]
        bad_c = {rng.randrange(m): k for k in forced_c} if m else {}
        for j, t in enumerate(ctimes):
            turns, outcome = _conversation(rng, dip)
            turns_text = json.dumps(turns)
            kind = bad_c.get(j)
            if kind == "non_json_turns":
                turns_text = turns_text[: len(turns_text) // 2]
            elif kind == "no_retrieval":
                for turn in turns:
                    turn["retrieval_context"] = None
                turns_text = json.dumps(turns)
            elif kind == "empty_expected_outcome":
                outcome = ""
            if kind is not None:
                info.malformed_conversations[kind].append(next_conv)
            conv_rows.append({"id": next_conv, "event_time": t, "turns": turns_text, "expected_outcome": outcome})
            next_conv += 1
        info.conversation_rows[day.isoformat()] = m

    engine = _engine(url_or_engine)
    info.url = redact_url(engine.url.render_as_string(hide_password=True))
    metadata = sa.MetaData()
    logs, convs = _tables(metadata, source_table, conversation_table)
    with engine.begin() as conn:
        metadata.drop_all(conn, checkfirst=True)
        metadata.create_all(conn)
        for start in range(0, len(log_rows), 5000):
            conn.execute(logs.insert(), log_rows[start : start + 5000])
        for start in range(0, len(conv_rows), 5000):
            conn.execute(convs.insert(), conv_rows[start : start + 5000])
    return info
