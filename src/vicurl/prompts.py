"""The paper's prompt template (appendix "Prompt Templates").

The paper puts the question first and the instruction after it; the authors' own
evaluation harness put the instruction first, as raw text, for base models. Both are a
config choice (``prompt.order``); instruct models get their tokenizer's chat template
(``models.<name>.chat_template: true``).
"""

from __future__ import annotations

INSTRUCTION = (
    "Let's think step by step and enclose the reasoning process within <think> and </think> tags. "
    "The final result in the answer MUST BE within \\boxed{}."
)
ORDERS = ("question_first", "instruction_first")


def user_turn(question: str, order: str = "question_first") -> str:
    if order == "question_first":
        return f"{question}\n{INSTRUCTION}"
    if order == "instruction_first":
        return f"{INSTRUCTION}\n{question}"
    raise ValueError(f"prompt.order must be one of {ORDERS}, got {order!r}")


def build_prompt(question: str, order: str = "question_first", tokenizer=None, chat_template: bool = False) -> str:
    """The text the model is conditioned on.

    Without a chat template the user turn is followed by a newline and the model continues
    from there (base models, the demo's tiny model).
    """
    text = user_turn(question, order)
    if chat_template:
        if tokenizer is None or not getattr(tokenizer, "chat_template", None):
            raise ValueError("chat_template: true but the tokenizer has no chat template")
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
        )
    return text + "\n"
