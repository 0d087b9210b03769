"""Images in test cases (issue 36, item 1): ``MLLMImage``, cases that hold images, the prompt a
multimodal judge receives (OpenAI ``image_url`` content parts, local files as data URLs, checked
on the request the local judge server received), the early refusal by a judge that is not
multimodal, judgment-cache keys that see the image, and warehouse rows with image elements."""

from __future__ import annotations

import base64
import hashlib
from datetime import datetime

import pytest
import sqlalchemy as sa

from ctxprec_ops import (
    ContextualPrecisionMetric,
    InvalidTestCaseError,
    JudgeModel,
    LLMTestCase,
    MLLMImage,
    OpenAIJudge,
    Turn,
    TurnContextualPrecisionMetric,
    evaluate,
)
from ctxprec_ops.cases.conversational import ConversationalTestCase
from ctxprec_ops.judge.models.names import reads_images
from ctxprec_ops.pipeline.rows import row_to_conversation, row_to_test_case
from ctxprec_ops.scoring.prompt_parts import MultimodalPrompt
from tests.fixtures.judge_server import image_label

# a 1x1 GIF and a different 1x1 GIF (another colour)
GIF_A = base64.b64decode("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==")
GIF_B = base64.b64decode("R0lGODlhAQABAIAAAP8AAP///yH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==")
CAT = "https://images.example.com/cat.png"


def _data_label(data: bytes, mime: str = "image/gif") -> str:
    return image_label(f"data:{mime};base64,{base64.b64encode(data).decode()}")


@pytest.fixture
def gif(tmp_path):
    path = tmp_path / "pixel.gif"
    path.write_bytes(GIF_A)
    return path


def _judge(server) -> OpenAIJudge:
    return OpenAIJudge("gpt-4o-mini", base_url=server.base_url, api_key="test-key")


# -- MLLMImage ------------------------------------------------------------------------------------


def test_image_fields_as_deepeval_sets_them(gif):
    remote = MLLMImage(url=CAT)
    assert (remote.local, remote.filename, remote.mimeType, remote.dataBase64) == (False, "cat.png", "image/png", None)
    local = MLLMImage(url=str(gif))
    assert (local.local, local.filename, local.mimeType) == (True, "pixel.gif", "image/gif")
    assert base64.b64decode(local.dataBase64) == GIF_A
    assert local.as_data_uri() == "data:image/gif;base64," + base64.b64encode(GIF_A).decode()
    as_file_url = MLLMImage(url=gif.as_uri())
    assert as_file_url.local is True and as_file_url.dataBase64 == local.dataBase64
    inline = MLLMImage(dataBase64=base64.b64encode(GIF_B).decode(), mimeType="image/gif")
    assert inline.url is None and inline.as_data_uri().startswith("data:image/gif;base64,")
    # the placeholder deepeval writes into texts, and equality by picture (not by id)
    assert str(remote) == f"{remote}" == repr(remote) == f"[DEEPEVAL:IMAGE:{remote._id}]"
    assert MLLMImage(url=CAT) == remote and MLLMImage(url=CAT)._id != remote._id
    assert MLLMImage.parse_multimodal_string(f"look: {remote} and {local}!") == ["look: ", remote, " and ", local, "!"]


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(), ValueError, "either a 'url' or both 'dataBase64' and 'mimeType'"),
        (dict(dataBase64="AAAA"), ValueError, "mimeType must be provided"),
        (dict(url="ftp://example.com/a.png"), ValueError, "Invalid remote URL format"),
        (dict(url="/no/such/file.png"), ValueError, "Invalid remote URL format"),
        (dict(url=CAT, local=True), ValueError, "Local path mismatch"),
    ],
)
def test_bad_images_fail_when_built(kwargs, error, match):
    with pytest.raises(error, match=match):
        MLLMImage(**kwargs)


# -- cases that hold images -----------------------------------------------------------------------


def test_cases_take_images_in_every_text_field_and_as_nodes(gif):
    cat, pixel = MLLMImage(url=CAT), MLLMImage(url=str(gif))
    case = LLMTestCase(
        input=f"What animal is in {pixel}?",
        actual_output=f"It is {cat}",
        expected_output=cat,  # an image in place of a text: its placeholder
        retrieval_context=["Cats purr.", cat, f"A photo: {pixel}"],
    )
    assert case.multimodal is True
    assert case.expected_output == str(cat) and case.retrieval_context[1] is cat
    assert case._get_images_mapping() == {cat._id: cat, pixel._id: pixel}
    assert LLMTestCase(input="q", retrieval_context=["text"]).multimodal is False
    # model_dump writes image nodes as objects, and a case built from it is equal
    dumped = case.model_dump()
    assert dumped["retrieval_context"][1] == {"url": CAT, "mimeType": "image/png"}
    assert LLMTestCase(**dumped) == case
    conv = ConversationalTestCase(
        turns=[
            Turn(role="user", content=f"see {pixel}"),
            Turn(role="assistant", content="ok", retrieval_context=[cat]),
        ],
        expected_outcome="o",
    )
    assert conv.multimodal is True and conv._get_images_mapping() == {pixel._id: pixel, cat._id: cat}


def test_a_judge_that_is_not_multimodal_refuses_the_case_by_name_before_any_call(judge_server):
    image_case = LLMTestCase(
        input="q", expected_output="a cat", retrieval_context=[MLLMImage(url=CAT)], id="row-7", name="photo"
    )
    with pytest.raises(InvalidTestCaseError, match=r"case 'row-7': images are not supported by the judge 'lexical'"):
        ContextualPrecisionMetric(model="lexical").measure(image_case)
    text_only = OpenAIJudge("my-local-text-model", base_url=judge_server.base_url, api_key="k")
    assert text_only.supports_multimodal() is False
    unnamed = LLMTestCase(input="q", expected_output="a", retrieval_context=[f"{MLLMImage(url=CAT)}"])
    result = evaluate(
        [LLMTestCase(input="q", expected_output="Paris", retrieval_context=["Paris RELEVANT"]), unnamed],
        [ContextualPrecisionMetric(model=text_only)],
    )
    first, second = result.results
    assert first.score == 1.0 and second.score is None and second.error_type == "invalid_input"
    assert "case at index 1: images are not supported by the judge 'my-local-text-model'" in second.error
    assert judge_server.calls == 1  # only the text case was judged


def test_the_multimodal_judge_receives_image_parts_remote_and_local(judge_server, gif):
    judge_server.oracle = lambda text, prompt: "cat.png" in text or _data_label(GIF_A) in text
    pixel = MLLMImage(url=str(gif))
    case = LLMTestCase(
        input=f"Which picture matches {pixel}?",
        expected_output="the cat picture",
        retrieval_context=["Dogs bark.", MLLMImage(url=CAT), "Birds sing."],
    )
    metric = ContextualPrecisionMetric(model=_judge(judge_server))
    assert metric.measure(case) == 0.5  # relevant at rank 2 of 3
    assert [v.relevant for v in metric.verdicts] == [False, True, False]
    (request,) = judge_server.requests
    content = request["json"]["messages"][0]["content"]
    assert [p["type"] for p in content] == ["text", "image_url", "text", "image_url", "text"]
    assert request["images"] == [pixel.as_data_uri(), CAT]  # the question's local file as a data URL
    assert request["node_ids"] == [1, 2, 3]


def test_a_custom_judge_declares_it_reads_images_and_gets_the_parts(gif):
    seen: list[MultimodalPrompt] = []

    class Vision(JudgeModel):
        multimodal = True

        def get_model_name(self):
            return "vision-judge"

        def generate(self, prompt, schema=None):
            seen.append(prompt)
            return {"verdicts": [{"node": 1, "relevant": True, "reason": "shows it"}]}

    pixel = MLLMImage(url=str(gif))
    case = LLMTestCase(input="q", expected_output="a", retrieval_context=[pixel])
    assert ContextualPrecisionMetric(model=Vision()).measure(case) == 1.0
    (prompt,) = seen
    assert isinstance(prompt, MultimodalPrompt) and [i.url for i in prompt.images] == [pixel.as_data_uri()]
    assert prompt.images[0].label == "pixel.gif"


@pytest.mark.parametrize(
    "name, reads",
    [
        ("gpt-4o-mini", True),
        ("gpt-4.1-nano", True),
        ("ft:gpt-4o-mini:org:custom:abc", True),
        ("openai/gpt-5", True),
        ("o1-mini", False),
        ("o3-mini", False),
        ("gpt-3.5-turbo", False),
        ("llava:13b", True),
        ("Qwen/Qwen2.5-VL-7B-Instruct", True),
        ("meta-llama/Llama-3.2-11B-Vision-Instruct", True),
        ("llama3.1:8b", False),
        ("judge-test-model", False),
    ],
)
def test_openai_judge_model_name_rules(name, reads):
    assert reads_images(name) is reads
    assert OpenAIJudge(name, api_key="k").supports_multimodal() is reads


def test_openai_judge_multimodal_argument_and_setting():
    """The argument wins over the model name; CTXPREC_JUDGE_MULTIMODAL reaches the judge through the
    run's configuration (``PipelineConfig.judge_multimodal``), the judge reads no variable."""
    from ctxprec_ops.config import Settings, SettingsError
    from ctxprec_ops.pipeline.judges import build_judge

    assert OpenAIJudge("my-vllm-model", api_key="k", multimodal=True).supports_multimodal() is True
    assert OpenAIJudge("gpt-4o", api_key="k", multimodal=False).supports_multimodal() is False
    yes = Settings.from_env({"CTXPREC_JUDGE_MULTIMODAL": "yes"}).pipeline_config(judge="my-vllm-model")
    assert yes.judge_multimodal is True and build_judge(yes).supports_multimodal() is True
    no = Settings.from_env({"CTXPREC_JUDGE_MULTIMODAL": "0"}).pipeline_config(judge="gpt-4o")
    assert build_judge(no).supports_multimodal() is False
    unset = Settings.from_env({}).pipeline_config(judge="gpt-4o")
    assert unset.judge_multimodal is None and build_judge(unset).supports_multimodal() is True
    with pytest.raises(SettingsError, match="CTXPREC_JUDGE_MULTIMODAL must be true or false"):
        Settings.from_env({"CTXPREC_JUDGE_MULTIMODAL": "maybe"})


# -- the judgment cache sees the image ------------------------------------------------------------


def test_cache_keys_see_the_image_url_path_and_content(tmp_path):
    metric = ContextualPrecisionMetric(model=OpenAIJudge("gpt-4o-mini", api_key="k"))

    def key(node) -> bytes:
        return metric.judgment_keys(LLMTestCase(input="q", expected_output="a", retrieval_context=[node]))[0]

    path = tmp_path / "photo.gif"
    path.write_bytes(GIF_A)
    first = key(MLLMImage(url=str(path)))
    assert key(MLLMImage(url=str(path))) == first  # another MLLMImage of the same file: the same verdict
    path.write_bytes(GIF_B)  # same path, other picture
    assert key(MLLMImage(url=str(path))) != first
    other = tmp_path / "copy.gif"
    other.write_bytes(GIF_A)  # same picture, other path
    assert key(MLLMImage(url=str(other))) != first
    assert key(MLLMImage(url=CAT)) == key(f"{MLLMImage(url=CAT)}")  # a node or a placeholder: one key
    assert key(MLLMImage(url=CAT)) != key(MLLMImage(url="https://images.example.com/dog.png"))
    assert key(MLLMImage(url=CAT)) != key(CAT)  # the image is not its URL as text
    # the question's image counts too
    q1 = LLMTestCase(input=f"{MLLMImage(url=CAT)}", expected_output="a", retrieval_context=["n"])
    q2 = LLMTestCase(input=f"{MLLMImage(url=str(other))}", expected_output="a", retrieval_context=["n"])
    assert metric.judgment_keys(q1) != metric.judgment_keys(q2)


def test_two_different_images_never_share_a_cached_verdict(judge_server, tmp_path):
    from ctxprec_ops.judge.cache import DictVerdictCache

    judge_server.oracle = lambda text, prompt: _data_label(GIF_A) in text
    cache = DictVerdictCache()
    path = tmp_path / "photo.gif"
    path.write_bytes(GIF_A)
    metric = ContextualPrecisionMetric(model=_judge(judge_server))

    def score() -> float | None:
        case = LLMTestCase(input="q", expected_output="a", retrieval_context=[MLLMImage(url=str(path))])
        return evaluate([case], [metric], cache=cache).results[0].score

    assert score() == 1.0 and judge_server.calls == 1
    assert score() == 1.0 and judge_server.calls == 1  # same picture: cached
    path.write_bytes(GIF_B)
    assert score() == 0.0 and judge_server.calls == 2  # another picture at the same path: judged again


# -- the turn metric --------------------------------------------------------------------------------


def test_turn_metric_sends_images_of_turns(judge_server):
    judge_server.oracle = lambda text, prompt: "cat.png" in text
    conv = ConversationalTestCase(
        turns=[
            Turn(role="user", content=f"what is this? {MLLMImage(url='https://images.example.com/x.jpg')}"),
            Turn(role="assistant", content="a cat", retrieval_context=["Dogs bark.", MLLMImage(url=CAT)]),
        ],
        expected_outcome="The user learns it is a cat.",
    )
    metric = TurnContextualPrecisionMetric(model=_judge(judge_server))
    assert metric.measure(conv) == 0.5
    assert judge_server.requests[0]["images"] == ["https://images.example.com/x.jpg", CAT]


# -- warehouse rows ---------------------------------------------------------------------------------


def test_rows_with_image_elements():
    data_url = "data:image/gif;base64," + base64.b64encode(GIF_A).decode()
    row = {
        "id": 1,
        "input": "q",
        "expected_output": "a",
        "actual_output": None,
        "retrieval_context": ["text", {"url": CAT}, {"url": data_url}],
    }
    case = row_to_test_case(row)
    assert case.multimodal is True
    node = case.retrieval_context[1]
    assert isinstance(node, MLLMImage) and node.url == CAT
    assert case.retrieval_context[2].as_data_uri() == data_url
    assert row_to_test_case({**row, "retrieval_context": ["text"]}).multimodal is False
    for bad, match in [
        ({"url": "/etc/passwd"}, "must be an http"),
        ({"url": "data:text/plain;base64,AAAA"}, "data:image"),
        ({"url": 5}, "an image object with 'url'"),
        ({"picture": CAT}, "keys picture"),
    ]:
        with pytest.raises(InvalidTestCaseError, match=match):
            row_to_test_case({**row, "retrieval_context": ["text", bad]})
    conv = row_to_conversation(
        {
            "id": 2,
            "expected_outcome": "o",
            "turns": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "x", "retrieval_context": [{"url": CAT}]},
            ],
        }
    )
    assert conv.multimodal is True and isinstance(conv.turns[1].retrieval_context[0], MLLMImage)


def test_pipeline_scores_image_rows_with_a_multimodal_judge(judge_server, tmp_path):
    from ctxprec_ops.pipeline import PipelineConfig, score_partition
    from ctxprec_ops.warehouse.engine import get_engine
    from tests.fixtures.warehouse_data import create_logs, log_row

    judge_server.oracle = lambda text, prompt: "cat.png" in text
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    rows = [
        log_row(1, datetime(2026, 11, 28, 1), context=["Dogs bark.", {"url": CAT}]),
        log_row(2, datetime(2026, 11, 28, 2), context=[{"url": CAT}, "Birds sing."]),
        log_row(3, datetime(2026, 11, 28, 3), context=["plain text only"]),
    ]
    create_logs(engine, rows)
    cfg = PipelineConfig(warehouse=url, judge="gpt-4o-mini", judge_base_url=judge_server.base_url, judge_api_key="k")
    summary = score_partition(cfg, "2026-11-28")
    assert summary.status == "succeeded" and summary.rows_scored == 3
    with engine.connect() as conn:
        got = dict(conn.execute(sa.text("SELECT log_id, score FROM ctxprec_scores")).all())
    assert got == {"1": 0.5, "2": 1.0, "3": 0.0}
    assert sorted(i for r in judge_server.requests for i in r["images"]) == [CAT, CAT]

    # a text-only judge: the image rows fail as bad input, naming the row; the text row is scored
    lexical = score_partition(PipelineConfig(warehouse=url, judge="lexical"), "2026-11-28")
    assert lexical.rows_scored == 1 and lexical.failures_by_type == {"invalid_input": 2}
    with engine.connect() as conn:
        messages = [m for (m,) in conn.execute(sa.text("SELECT error_message FROM ctxprec_failures ORDER BY log_id"))]
    assert messages[0].startswith("case '1': images are not supported by the judge 'lexical'")


def test_content_hash_of_images_is_a_digest_not_the_data(gif):
    image = MLLMImage(url=str(gif))
    assert len(image.key) == 32 and hashlib.sha256(GIF_A).hexdigest()[:32] != image.key
    assert image.dataBase64 not in image.key


def test_pdfs_are_refused_and_reports_name_images():
    from ctxprec_ops.cases.contexts import display_nodes

    pdf = MLLMImage(dataBase64="JVBERi0=", mimeType="application/pdf")
    assert str(pdf).startswith("[DEEPEVAL:PDF:")
    case = LLMTestCase(input="q", expected_output="a", retrieval_context=[f"{pdf}"])
    assert case.multimodal is True
    metric = ContextualPrecisionMetric(model=OpenAIJudge("gpt-4o-mini", api_key="k"))
    with pytest.raises(InvalidTestCaseError, match=r"retrieval_context\[0\] holds a PDF document"):
        metric.judge_requests(case)
    cat = MLLMImage(url=CAT)
    assert display_nodes(["text", cat, {"url": CAT}, {"url": "data:image/png;base64,AAAA"}, f"see {cat}"]) == [
        "text",
        "[image: cat.png]",
        f"[image: {CAT}]",
        "[image: inline]",
        "see [image: cat.png]",
    ]
