"""The paper's prompt, with multiple-choice options as lettered lines, in training and evaluation."""

import pandas as pd
import pytest

import vicurl.evaluation.generate as gen
from vicurl.config.settings import SamplingSettings
from vicurl.data.prompts import INSTRUCTION, build_prompt
from vicurl.data.schema import make_row, to_frame


def test_plain_question_is_the_paper_template():
    assert build_prompt("What is 2+2?") == f"What is 2+2?\n{INSTRUCTION}\n"
    assert build_prompt("What is 2+2?", "instruction_first") == f"{INSTRUCTION}\nWhat is 2+2?\n"


def test_options_are_lettered_lines():
    q = "Which is prime?"
    assert build_prompt(q, options=["21", "29", "33"]) == f"{q}\n\nA. 21\nB. 29\nC. 33\n{INSTRUCTION}\n"
    assert build_prompt(q, "instruction_first", options=("21", "29")) == f"{INSTRUCTION}\n{q}\n\nA. 21\nB. 29\n"
    assert build_prompt(q, options=[]) == build_prompt(q)


def mc_problems():
    return to_frame([
        make_row(id="m0", source="t", question="Pick the even one.", answer="B", answer_type="multiple_choice",
                 options=["3", "4", "5"]),
        make_row(id="p0", source="t", question="What is 1 + 1?", answer="2"),
    ])


def test_generation_shows_the_options(char_model_dir, monkeypatch):
    seen = {}

    def fake_sample(model, tokenizer, prompts, n, **kw):
        seen["prompts"] = prompts
        raise RuntimeError("stop")

    monkeypatch.setattr(gen, "sample", fake_sample)
    with pytest.raises(RuntimeError, match="stop"):
        gen.generate_records(str(char_model_dir), mc_problems(),
                             SamplingSettings(n=1, temperature=1.0, top_p=1.0, max_new_tokens=2, seed=0), batch_size=2)
    assert seen["prompts"] == [build_prompt("Pick the even one.", options=["3", "4", "5"]), build_prompt("What is 1 + 1?")]


def test_training_shows_the_options(char_model_dir, tmp_path):
    from vicurl.config.settings import TrainSettings
    from vicurl.engines.local import LocalTrainer

    cfg = TrainSettings(total_steps=1, batch_size=2, group_size=2, kl_coef=0.0)
    tr = LocalTrainer(cfg, char_model_dir, mc_problems(), tmp_path / "w")
    assert tr.prompts[0].startswith("Pick the even one.\n\nA. 3\nB. 4\nC. 5\n")
    plain = pd.DataFrame({"id": ["a", "b"], "question": ["x?", "y?"], "answer": ["1", "2"]})  # no options column
    assert LocalTrainer(cfg, char_model_dir, plain, tmp_path / "v").prompts == [build_prompt("x?"), build_prompt("y?")]


CHAT = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}")


class Tok:
    """A tokenizer's chat-template interface (transformers' own is used in test_vllm_generate)."""

    def __init__(self, template=None):
        self.chat_template = template

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True, **kwargs):
        import jinja2

        return jinja2.Template(self.chat_template).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                                          **kwargs)


def test_a_tokenizer_with_a_chat_template_gets_a_single_turn_conversation_by_default():
    """The paper: prompts are "formatted as a single-turn conversation" (auto); false keeps raw text."""
    from vicurl.data.prompts import build_prompts, uses_chat_template

    q = "What is 2+2?"
    chat, plain = Tok(CHAT), Tok(None)
    assert build_prompt(q, tokenizer=chat) == f"<|user|>{q}\n{INSTRUCTION}<|end|><|assistant|>"
    assert build_prompt(q, tokenizer=chat, chat_template=True) == build_prompt(q, tokenizer=chat)
    assert build_prompt(q, tokenizer=chat, chat_template=False) == f"{q}\n{INSTRUCTION}\n"
    assert build_prompt(q, tokenizer=plain) == f"{q}\n{INSTRUCTION}\n"  # auto: no template, raw text
    with pytest.raises(ValueError, match="no chat template"):
        build_prompt(q, tokenizer=plain, chat_template=True)
    with pytest.raises(ValueError, match="chat_template must be one of"):
        uses_chat_template(chat, "yes")
    problems = mc_problems()
    assert build_prompts(problems, tokenizer=chat) == [
        build_prompt("Pick the even one.", tokenizer=chat, options=["3", "4", "5"]), build_prompt("What is 1 + 1?", tokenizer=chat)]


# what Llama 3.x's chat templates do with the date (their system header)
DATED = ('{%- if not date_string is defined %}{%- if strftime_now is defined %}'
         '{%- set date_string = strftime_now("%d %b %Y") %}{%- else %}{%- set date_string = "26 Jul 2024" %}'
         '{%- endif %}{%- endif %}Today Date: {{ date_string }}\n' + CHAT)


def test_a_template_that_reads_the_clock_renders_one_fixed_date(char_model_dir, monkeypatch):
    """Llama-3.2-Instruct's template writes today's date (transformers' ``strftime_now``) into every
    prompt: rendered with a fixed date, a prompt is the same text on any day (a resumed run, a rerun,
    the evaluation), here on a day the clock is moved to."""
    import datetime

    from transformers import AutoTokenizer

    from vicurl.data.prompts import CHAT_DATE

    tok = AutoTokenizer.from_pretrained(char_model_dir)
    tok.chat_template = DATED
    q = "What is 2+2?"
    today = datetime.datetime.now().strftime("%d %b %Y")
    assert today in tok.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False)  # the clock, unfixed
    prompt = build_prompt(q, tokenizer=tok)
    assert prompt == f"Today Date: {CHAT_DATE}\n<|user|>{q}\n{INSTRUCTION}<|end|><|assistant|>"

    class Later(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.datetime(2031, 1, 2, tzinfo=tz)

    monkeypatch.setattr("transformers.utils.chat_template_utils.datetime", Later)  # the clock its strftime_now reads
    assert "02 Jan 2031" in tok.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False)
    assert build_prompt(q, tokenizer=tok) == prompt


def test_every_paper_model_uses_its_chat_template_unless_told_otherwise():
    import yaml

    from vicurl.config import checks, runs

    from harness import DEMO_CONFIG, PAPER_CONFIG

    paper = checks.with_defaults(yaml.safe_load(PAPER_CONFIG.read_text()))
    assert {m: runs.chat_template(paper, m) for m in paper["models"]} == {m: "auto" for m in paper["models"]}
    demo = checks.with_defaults(yaml.safe_load(DEMO_CONFIG.read_text()))
    assert runs.chat_template(demo, "tiny") is False  # the built tiny model: raw text


def test_the_run_records_the_rendered_prompt(char_model_dir):
    from vicurl.data.prompts import rendered_example

    ex = rendered_example(str(char_model_dir), mc_problems(), "question_first", "auto")
    assert ex == {"text": build_prompt("Pick the even one.", options=["3", "4", "5"]), "chat_template": False,
                  "setting": "auto"}
