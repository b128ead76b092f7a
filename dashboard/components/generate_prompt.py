"""The Generate page's prompt: typed or uploaded (.txt), the chat template switch, the text the model reads (template
tokens visible), and the decoding settings (max new tokens, greedy or sampled with a seed and temperature)."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import streamlit as st

from xaidash.dashboard.components.generate_answer import shown_token
from xaidash.data.errors import ExplainError
from xaidash.data.text_files import decode_text
from xaidash.models.language.model import LanguageModel
from xaidash.models.language.prompt import MAX_NEW_TOKENS, MAX_PROMPT_TOKENS, Prompt

PROMPT_KEY = "gen_prompt"
UPLOADED_KEY = "gen_uploaded"  # the upload whose text is in the prompt box (a new upload replaces the text once)
DEFAULT_PROMPT = "What is the capital of France?"
DEFAULT_NEW_TOKENS = 32
MAX_UPLOAD_CHARS = 200_000  # a longer file is cut before tokenising (the prompt bound cuts it further)


@dataclass(frozen=True)
class PromptSettings:
    text: str
    chat: bool
    show_rendered: bool
    max_new_tokens: int
    sample: bool
    temperature: float
    seed: int


def _apply_upload(upload: Any) -> None:
    """A new .txt upload becomes the prompt box's text (once: the user may edit it afterwards)."""
    if upload is None or st.session_state.get(UPLOADED_KEY) == upload.file_id:
        return
    st.session_state[UPLOADED_KEY] = upload.file_id
    try:  # the encoding its byte-order mark names, else UTF-8; a file that is not text is refused in one line
        text = decode_text(upload.getvalue(), upload.name, error=ExplainError).text
    except ExplainError as e:
        st.error(str(e), icon=":material/error:")
        return
    st.session_state[PROMPT_KEY] = text[:MAX_UPLOAD_CHARS]


def prompt_inputs(lm: LanguageModel) -> PromptSettings:
    """The prompt box, its upload, and the settings of the generation."""
    st.session_state.setdefault(PROMPT_KEY, DEFAULT_PROMPT)
    left, right = st.columns([5, 3])
    with right:
        upload = st.file_uploader(
            "… or upload a .txt file",
            type=["txt"],
            key="gen_upload",
            help=f"its text replaces the prompt; prompts over {MAX_PROMPT_TOKENS} tokens are cut, with a notice",
        )
        _apply_upload(upload)
        has_template = lm.has_chat_template
        chat = st.toggle(
            "Chat template",
            value=has_template,
            disabled=not has_template,
            key=f"gen_chat_{has_template}",
            help="wrap the prompt in the model's chat template (a user turn, then the assistant's turn opened), as "
            "an instruction-tuned model was trained to read it"
            if has_template
            else f"{lm.name} has no chat template: the prompt is read as it is",
        )
        show = st.toggle(
            "Show the text the model reads", value=False, key="gen_show_rendered", help="template tokens included"
        )
    with left:
        text = st.text_area(
            "Prompt",
            key=PROMPT_KEY,
            height=120,
            placeholder="Ask a question or give an instruction",
        )
    c1, c2, c3, c4 = st.columns(4)
    max_new = int(
        c1.number_input(
            "Max new tokens",
            min_value=1,
            max_value=MAX_NEW_TOKENS,
            value=DEFAULT_NEW_TOKENS,
            step=1,
            key="gen_max_new",
            help=f"generation stops at the end-of-text token or after this many tokens (at most {MAX_NEW_TOKENS})",
        )
    )
    decoding = c2.radio(
        "Decoding",
        ["greedy", "sampling"],
        horizontal=True,
        key="gen_decoding",
        help="greedy: the most probable token at every step (the same answer every time); sampling: tokens drawn "
        "from the model's probabilities sharpened or flattened by the temperature, reproducible with the seed",
    )
    sample = decoding == "sampling"
    temperature = float(c3.slider("Temperature", 0.1, 2.0, 0.7, 0.05, key="gen_temperature", disabled=not sample))
    seed = int(
        c4.number_input("Seed", min_value=0, max_value=2**31 - 1, value=0, step=1, key="gen_seed", disabled=not sample)
    )
    return PromptSettings(text or "", bool(chat), bool(show), max_new, sample, temperature, seed)


def rendered_view(prompt: Prompt) -> None:
    """The text the model reads, template tokens included, and its tokens: the user's own (the features the
    explanations perturb) on white, template and special tokens greyed."""
    st.code(prompt.rendered, language=None, wrap_lines=True)
    own = set(prompt.features)
    chips = "".join(
        f'<span title="{html.escape(repr(t), quote=True)}" style="white-space:pre;display:inline-block;margin:1px;'
        f"padding:0 3px;border-radius:3px;font-family:monospace;font-size:13px;"
        + ("border:1px solid #888;background:#fff" if i in own else "border:1px dashed #bbb;background:#eee;color:#777")
        + f'">{html.escape(shown_token(t))}</span>'
        for i, t in enumerate(prompt.tokens)
    )
    st.markdown(f'<div style="line-height:1.9">{chips}</div>', unsafe_allow_html=True)
    template = "the chat template's" if prompt.chat else "no template:"
    st.caption(
        f"{len(prompt)} tokens; {len(prompt.features)} are your text (white: the features the explanations perturb), "
        f"the other {len(prompt) - len(prompt.features)} are {template} tokens (grey) and special tokens."
    )
