"""The `reply` verifier: the hacks a real model found on the retail reply rows and their neighbours, in
English and Chinese, each scoring 0 correctness; real replies to the same requests, which must pass."""

from __future__ import annotations

import json
import pickle

import pytest

from rlvrflow.verifiers import verify
from rlvrflow.verifiers.config import RewardConfig
from rlvrflow.verifiers.reply import check_reference
from rlvrflow.verifiers.shaping import reward

LINK = "https://shop.example.com/returns"
JUNK = "-startshesen-reti&#4227= qz%7B}}|~"
FORMAT = "<link> - <what the customer should do>"  # the retail spec's placeholder
OLD_FORMAT = f"{LINK} - start the return there."  # the example SmolLM2-135M copied
PARAMS = {"format_example": FORMAT, "forbidden": ["Requirements:", "Format:"]}
REQUIREMENTS = f"answer the customer by name about the item in a short polite reply with the returns page link {LINK}"

# two retail reply rows as the generator writes them: the request, its reference
EN_QUESTION = "Draft a short reply to Sam Lee, who asks where to print a return label for the ceramic mug."
EN_REF = json.dumps(
    {
        "link": LINK,
        "mention": ["Sam Lee", "ceramic mug"],
        "action": ["download"],
        "reply": f"{LINK} - Sam Lee, you can download the return label for the ceramic mug on that page.",
    }
)
ZH_QUESTION = "给王芳写一条简短回复，TA问：陶瓷杯的退款多久到账。回复中必须包含退货页面链接。"
ZH_REF = json.dumps(
    {
        "link": LINK,
        "mention": ["王芳", "陶瓷杯"],
        "action": ["7个工作日"],
        "reply": f"{LINK} 王芳您好，陶瓷杯的退款会在7个工作日内退回原支付账户。",
    },
    ensure_ascii=False,
)


def _prompt(question: str) -> str:
    return f"{question}\nRequirements: {REQUIREMENTS}\nFormat: {FORMAT}"


def _attacks(question: str, name: str, item: str, action: str, stock: str, other: str) -> dict[str, str]:
    keywords = [LINK, name, item, action]
    return {
        "the format example": FORMAT,
        "the format example and the name": f"{FORMAT}, {name}.",
        "the old format example and the name": f"{OLD_FORMAT.rstrip('.')}, {name}.",
        "the old format example, the name and the item": f"{OLD_FORMAT.rstrip('.')}, {name}, {item}.",
        "one stock reply for every request": stock,
        "the reply to another kind of request": other,
        "an echo of the prompt": _prompt(question),
        "an echo of the request with the link": f"{question} {LINK}",
        "the required parts padded with junk": f"{' '.join(keywords)} {JUNK}",
        "a right reply padded with junk": f"{LINK} {name} {item} {action} qz&#4227=xk",
        "the link repeated": f"{LINK} {LINK} {LINK}",
        "the link followed by junk": f"{LINK} - {LINK.rsplit('/', 1)[0]}/-startshesen-reti&#4227=",
        "the required keywords listed": " ".join(keywords),
        "the required keywords listed with commas": ", ".join(keywords) + ".",
        "the required keywords repeated": " ".join(keywords * 4),
        "the keywords but the link repeated": f"{LINK} " + f"{name} {item} {action} " * 4,
        "empty": "",
        "blank": "   ",
    }


HACKS = {
    "en": (
        EN_REF,
        _attacks(
            EN_QUESTION,
            "Sam Lee",
            "ceramic mug",
            "download",
            f"{LINK} - Hi Sam Lee, you can start the return for the ceramic mug on that page, thanks.",
            f"{LINK} - Sam Lee, the refund for the ceramic mug reaches your account within 7 business days.",
        ),
    ),
    "zh": (
        ZH_REF,
        _attacks(
            ZH_QUESTION,
            "王芳",
            "陶瓷杯",
            "7个工作日",
            f"{LINK} 王芳您好，陶瓷杯请在此页面办理退货。",
            f"{LINK} 王芳您好，陶瓷杯的退货单可以在此页面下载。",
        ),
    ),
}
CORRECT = {
    "en": [
        f"{LINK} - Sam Lee, you can download the return label for the ceramic mug on that page.",
        f"Hi Sam Lee, you can download the return label for your ceramic mug at {LINK}. Sorry for the trouble!",
        f"Dear Sam Lee, please download the ceramic mug's label from [our returns page]({LINK}) and print it.",
        f"Hello SAM LEE - the label for the Ceramic Mug: DOWNLOAD it at {LINK}/, then print it.",
    ],
    "zh": [
        f"{LINK} 王芳您好，陶瓷杯的退款会在7个工作日内退回原支付账户。",
        f"王芳您好，陶瓷杯的退款7个工作日内到账，详情见{LINK}。",
        f"{LINK} 王芳您好！您的陶瓷杯退款将在7个工作日内原路退回。我的电话是<PHONE>。",
    ],
}


@pytest.mark.parametrize("lang,attack", [(lang, name) for lang, (_, hacks) in HACKS.items() for name in hacks])
def test_reply_hack_scores_no_correctness(lang, attack):
    reference, hacks = HACKS[lang]
    response = hacks[attack]
    v = verify("reply", response, reference, PARAMS)
    parts = reward(v, response, len(response), RewardConfig(format_weight=0.1, correctness_weight=1.0))
    assert v.score == 0.0 and not v.correct and parts.correctness == 0.0 and parts.total <= 0.1, v


@pytest.mark.parametrize("lang,response", [(lang, r) for lang, rs in CORRECT.items() for r in rs])
def test_real_replies_pass(lang, response):
    reference = HACKS[lang][0]
    assert check_reference(reference, PARAMS) is None
    v = verify("reply", response, reference, PARAMS)
    assert v.correct and v.score == 1.0 and v.extracted == LINK, v


OLD_REF = json.dumps(
    {
        "link": LINK,
        "mention": [["Sam Lee", "Mr Lee"]],
        "action": ["start the return"],
        "reply": f"{LINK} - Sam Lee, you can start the return on that page.",
    }
)
OLD_PARAMS = {"format_example": OLD_FORMAT, "forbidden": ["Requirements:", "Format:"]}


@pytest.mark.parametrize(
    "response,ok",
    [
        # the prompt that still showed the link: its example, however it is extended, and a bare keyword list score 0
        (OLD_FORMAT, False),
        (f"{LINK} - start the return there, Sam Lee.", False),  # the hole: the example plus the name
        (f"{LINK} - start the return there. Sam Lee", False),
        (f"Sam Lee: {LINK} - start the return there!", False),
        (f"{LINK} Sam Lee start the return", False),  # only the required parts
        (f"Sam Lee, start the return at {LINK}/.", False),  # one word besides them
        # each check on its own
        (f"Hi Mr Lee, sorry about the scratch. You can start the return at {LINK}.", True),
        (f"Hi Sam Lee, start the return on [our returns page]({LINK}). My phone is <PHONE>.", True),
        (f"Hi Sam Lee, the refund costs $0 - start the return at {LINK}, 100% free.", True),
        (f"Sam Lee, you can start the return at {LINK}-startshesen now", False),  # the link is not whole
        (f"Sam Lee, you can start the return at {LINK} or {LINK}", False),  # link spam
        (f"Sam Lee, you can start the return at {LINK}/label", False),  # the wrong link
        (f"Sam Lee, you can start the return at https://evil.example/x and {LINK}", False),  # a second URL
        (f"Hi Sam Lee, please see our page {LINK}.", False),  # no action
        (f"Hello, you can start the return at {LINK}.", False),  # not this customer
        ("Sam Lee, you can start the return on our returns page.", False),  # no link
        (f"Sam Lee asks how to return a kettle.\nRequirements: include {LINK}\nFormat: ...", False),  # prompt echo
        ("Sam Lee " * 4 + f"you can start the return at {LINK}", False),  # the name repeated
        ("\x00\x01" + LINK, False),
        (f"Sam Lee, you can start the return at {LINK} " + "a" * 700, False),
    ],
)
def test_reply_table_on_the_old_prompt(response, ok):
    v = verify("reply", response, OLD_REF, OLD_PARAMS)
    assert v.correct is ok, v
    assert v.score == (1.0 if ok else 0.0) and v.status in ("correct", "wrong", "unparsed")


def test_min_words_is_the_sentence_check():
    terse = f"{LINK} Sam Lee ceramic mug download"
    assert "a list of keywords" in verify("reply", terse, EN_REF, PARAMS).detail
    assert verify("reply", terse, EN_REF, {**PARAMS, "min_words": 0}).correct  # a rule may turn it off
    assert not verify("reply", f"{LINK} 王芳您好 陶瓷杯 7个工作日", ZH_REF, PARAMS).correct  # 您好: two characters


@pytest.mark.parametrize(
    "reference,fix",
    [
        ("not json", "is not JSON"),
        (json.dumps(["x"]), "JSON object"),
        (json.dumps({"link": "shop.example.com/returns", "action": "a", "reply": "r"}), "'link' must be one URL"),
        (json.dumps({"link": LINK, "action": "a"}), "needs 'reply'"),
        (json.dumps({"link": LINK, "reply": f"{LINK} hi"}), "needs 'action'"),
        (json.dumps({"link": LINK, "mention": [""], "action": "go", "reply": f"{LINK} go"}), "non-empty string"),
        (json.dumps({"link": LINK, "required": [LINK], "action": "go", "reply": f"{LINK} go"}), "unknown keys"),
        # the reference's own reply must pass the rule: here it never names the customer
        (
            json.dumps({"link": LINK, "mention": ["Sam Lee"], "action": "go", "reply": f"{LINK} go there now please"}),
            "own reply fails",
        ),
    ],
)
def test_reply_reference_errors_name_the_fix(reference, fix):
    problem = check_reference(reference, {})
    assert problem is not None and fix in problem, problem
    assert verify("reply", "anything", reference, {}).status in ("error", "wrong")


def test_a_reference_reply_that_is_the_format_example_or_a_keyword_list_is_a_data_error():
    copy = json.dumps(
        {
            "link": LINK,
            "mention": ["Sam Lee"],
            "action": "start the return",
            "reply": f"{LINK} - start the return there, Sam Lee.",
        }
    )
    assert "format example" in check_reference(copy, OLD_PARAMS)
    assert "a list of keywords" in check_reference(copy, {})  # and only one word besides the parts
    assert check_reference(OLD_REF, OLD_PARAMS) is None
    assert "max_hits" in check_reference(OLD_REF, {"max_hits": -1})
    assert "min_words" in check_reference(OLD_REF, {"min_words": "3"})
    assert "forbidden" in check_reference(OLD_REF, {"forbidden": "Format:"})
    assert verify("reply", f"Sam Lee, start the return at {LINK}", OLD_REF, {"max_chars": "x"}).status == "error"


def test_reply_verdict_pickles():
    v = verify("reply", CORRECT["en"][1], EN_REF, PARAMS)
    assert pickle.loads(pickle.dumps(v)) == v and v.extracted == LINK
