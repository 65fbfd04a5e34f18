"""The paper's prompt template (appendix "Prompt Templates").

The paper puts the question first and the instruction after it; the authors' own
evaluation harness put the instruction first, as raw text, for base models. Both are a
config choice (``prompt.order``); instruct models get their tokenizer's chat template
(``models.<name>.chat_template: true``).

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


def build_prompt(
    question: str,
    order: str = "question_first",
    tokenizer=None,
    chat_template: bool = False,
    options: Sequence[str] = (),
) -> str:
    """The text the model is conditioned on (``options``: a multiple-choice row's options).

    Without a chat template the user turn is followed by a newline and the model continues
    from there (base models, the demo's tiny model).
    """
    text = user_turn(question, order, options)
    if chat_template:
        if tokenizer is None or not getattr(tokenizer, "chat_template", None):
            raise ValueError("chat_template: true but the tokenizer has no chat template")
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
        )
    return text + "\n"


def prompt_token_ids(tokenizer, text: str) -> list[int]:
    """The token ids a model is conditioned on for prompt ``text``: the one definition shared by
    the CPU sampler, vLLM evaluation and (through verl's RLHFDataset, which tokenizes the same
    way) training.

    No special tokens are added: a chat template already renders its own BOS (Llama's
    ``<|begin_of_text|>``), and base models are trained on the bare text. Tokenizing with special
    tokens (vLLM's default for string prompts) would put a second or an unseen BOS in front.
    """
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])
