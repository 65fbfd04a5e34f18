"""The paper's prompt template (appendix "Prompt Templates").

The paper puts the question first and the instruction after it; the authors' own
evaluation harness put the instruction first, as raw text, for base models. Both are a
config choice (``prompt.order``). The paper's appendix: "During preprocessing, this is formatted
as a single-turn conversation" (verl's data pipeline applies the tokenizer's chat template), for
training and evaluation alike; so every model whose tokenizer has a chat template gets the user
turn through it (``models.<name>.chat_template: auto``, the default), ``true`` requires one and
``false`` keeps raw text.

Multiple-choice questions (schema answer type ``multiple_choice``) show their options after
the question as lettered lines, ``A. ...``, ``B. ...``, as MMLU-Pro's and GPQA's harnesses
do; the gold answer is the letter. The paper's instruction is unchanged for every set.
"""

from __future__ import annotations

from typing import Sequence

from vicurl.data.schema import LETTERS

INSTRUCTION = (
    "Let's think step by step and enclose the reasoning process within <think> and </think> tags. "
    "The final result in the answer MUST BE within \\boxed{}."
)
ORDERS = ("question_first", "instruction_first")


def with_options(question: str, options: Sequence[str] = ()) -> str:
    """The question followed by its options as lettered lines (unchanged when there are none)."""
    options = list(options if options is not None else ())
    if not options:
        return question
    if len(options) > len(LETTERS):
        raise ValueError(f"{len(options)} options; at most {len(LETTERS)} can be lettered")
    lines = "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(options))
    return f"{question}\n\n{lines}"


def user_turn(question: str, order: str = "question_first", options: Sequence[str] = ()) -> str:
    question = with_options(question, options)
    if order == "question_first":
        return f"{question}\n{INSTRUCTION}"
    if order == "instruction_first":
        return f"{INSTRUCTION}\n{question}"
    raise ValueError(f"prompt.order must be one of {ORDERS}, got {order!r}")


CHAT_TEMPLATE = ("auto", True, False)  # models.<name>.chat_template


def uses_chat_template(tokenizer, chat_template: bool | str = "auto") -> bool:
    """Whether prompts go through the tokenizer's chat template: ``auto`` when it has one,
    ``True`` always (an error without one), ``False`` never."""
    has = tokenizer is not None and bool(getattr(tokenizer, "chat_template", None))
    if chat_template == "auto":
        return has
    if chat_template is True:
        if not has:
            raise ValueError("chat_template: true but the tokenizer has no chat template")
        return True
    if chat_template is False:
        return False
    raise ValueError(f"chat_template must be one of {CHAT_TEMPLATE}, got {chat_template!r}")


# The date a chat template renders: Llama 3.x's templates write "Today Date: <date>" into every prompt, the
# clock's (`strftime_now`) unless given `date_string`, so a resumed run, a rerun or an evaluation would
# condition on other text (and a long-prompt drop could flip). This is the date those templates fall back
# to themselves; a template that names no date ignores it.
CHAT_DATE = "26 Jul 2024"


def build_prompt(
    question: str,
    order: str = "question_first",
    tokenizer=None,
    chat_template: bool | str = "auto",
    options: Sequence[str] = (),
) -> str:
    """The text the model is conditioned on (``options``: a multiple-choice row's options).

    Without a chat template the user turn is followed by a newline and the model continues
    from there (the demo's tiny model, ``chat_template: false``).
    """
    text = user_turn(question, order, options)
    if uses_chat_template(tokenizer, chat_template):
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True, date_string=CHAT_DATE
        )
    return text + "\n"


def build_prompts(problems, order: str = "question_first", tokenizer=None, chat_template: bool | str = "auto") -> list[str]:
    """The prompt of every row of a problems table (normalized schema: ``question``, and ``options``
    for multiple-choice rows): the one rendering shared by training (both engines), evaluation
    and the prompt statistics."""
    options = problems["options"] if "options" in problems else [()] * len(problems)
    return [build_prompt(str(q), order, tokenizer, chat_template, options=o) for q, o in zip(problems["question"], options)]


def prompt_token_ids(tokenizer, text: str) -> list[int]:
    """The token ids a model is conditioned on for prompt ``text``: the one definition shared by
    the CPU sampler, vLLM evaluation and (through verl's RLHFDataset, which tokenizes the same
    way) training.

    No special tokens are added: a chat template already renders its own BOS (Llama's
    ``<|begin_of_text|>``), and base models are trained on the bare text. Tokenizing with special
    tokens (vLLM's default for string prompts) would put a second or an unseen BOS in front.
    """
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def rendered_example(model_dir: str, problems, order: str = "question_first", chat_template: bool | str = "auto") -> dict:
    """The first row's prompt as a model conditioned on it (recorded in a run's provenance), and
    whether it went through the tokenizer's chat template."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return {"text": build_prompts(problems.head(1), order, tokenizer, chat_template)[0],
            "chat_template": uses_chat_template(tokenizer, chat_template), "setting": chat_template}
