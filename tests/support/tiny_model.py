"""Build a tiny random-weight Qwen3-MoE model and its tokenizer offline (no hub access).

The tokenizer is a byte-level BPE trained in a second with the ``tokenizers`` library on a
small synthetic corpus, wrapped as ``PreTrainedTokenizerFast`` with a ChatML chat template so
``/v1/chat/completions`` works. The model is ``Qwen3MoeForCausalLM`` from a
``Qwen3MoeConfig`` with small sizes (hidden 64, 2 layers, 8 experts, top-2): its text is noise
but its serving path is the real one. Throughput is real too, on whatever device serves it.

``python tests/support/tiny_model.py OUT_DIR`` writes a model folder ``transformers serve`` can load;
``--hidden 256 --text-tokens`` one vLLM's CPU build serves (its CPU attention needs head_dim >= 32,
and greedy decoding of a random model repeats one token: with ``text_tokens`` that token is text,
never a special token or a lone byte that streams nothing; scripts/install_vllm_cpu.sh).
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_SYLLABLES = "ka lo mi nu te ra so vi pe du ne ga zo fi bu ri ma ho lu se".split()


def _corpus(lines: int = 2000, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words = ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(400)]
    return [
        " ".join(rng.choice(words) for _ in range(rng.randint(5, 20))) + "." for _ in range(lines)
    ]


def _ascii_alphabet() -> list[str]:
    """The byte-level symbols of printable ASCII, space and newline (GPT-2's byte-to-unicode map:
    ``!``..``~`` are themselves, space is U+0120, newline U+010A)."""
    return [chr(b) for b in range(33, 127)] + ["\u0120", "\u010a"]


def train_tokenizer_json(
    out_dir: str | Path, vocab_size: int = 512, *, ascii_only: bool = False
) -> Path:
    """Train a byte-level BPE tokenizer; write ``tokenizer.json`` in ``out_dir``; return its path.

    ``ascii_only``: the base alphabet is printable ASCII instead of all 256 bytes, so every token
    decodes to text on its own (a lone byte of a multi-byte character decodes to nothing while a
    streaming detokenizer waits for the rest: a greedy model stuck on one streams no content)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        initial_alphabet=_ascii_alphabet() if ascii_only else pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "tokenizer.json"
    tok.save(str(path))
    return path


def build_tiny_model(
    out_dir: str | Path,
    *,
    seed: int = 0,
    hidden: int = 64,
    layers: int = 2,
    experts: int = 8,
    stop_at_eos: bool = True,
    text_tokens: bool = False,
) -> Path:
    """Write a random-weight Qwen3-MoE model, tokenizer and chat template to ``out_dir``; return it.

    ``stop_at_eos=False`` leaves the end-of-sequence token out of the model's configs, so every
    completion runs to ``max_tokens``: the fixed output length a benchmark needs from an engine
    that cannot ignore EOS (``transformers serve`` refuses ``ignore_eos``). A random model
    otherwise ends some prompts at once (seen on the H200: 11 of 64 streams carried no content).

    Raises:
        ImportError: torch or transformers are not installed.
    """
    import torch
    from transformers import PreTrainedTokenizerFast, Qwen3MoeConfig, Qwen3MoeForCausalLM

    out = Path(out_dir)
    tok_path = train_tokenizer_json(out, ascii_only=text_tokens)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_file=str(tok_path),
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out)
    torch.manual_seed(seed)
    config = Qwen3MoeConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        moe_intermediate_size=hidden // 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden // 4,
        num_experts=experts,
        num_experts_per_tok=2,
        decoder_sparse_step=1,
        max_position_embeddings=2048,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    model = Qwen3MoeForCausalLM(config).to(torch.float32)
    if text_tokens:
        # Special tokens' (tied) embedding rows zeroed: their logit is 0 while the largest of the
        # others is positive, so greedy decoding never emits one (it would stream no text).
        with torch.no_grad():
            for token in SPECIAL:
                model.get_input_embeddings().weight[tokenizer.convert_tokens_to_ids(token)] = 0.0
    model.generation_config.eos_token_id = config.eos_token_id if stop_at_eos else None
    model.generation_config.pad_token_id = config.pad_token_id
    if not stop_at_eos:
        model.config.eos_token_id = None
        # Nor may it emit a special token (skipped when decoding) or a token that does not start
        # a word: transformers serve streams text at word boundaries, and a random model that
        # repeats one mid-word token streams nothing at all (20% of prompts on the H200, with
        # transformers 5.17). Every token a word: one streamed chunk per token.
        vocab = tokenizer.get_vocab()
        model.generation_config.suppress_tokens = sorted(
            i for t, i in vocab.items() if t in SPECIAL or not t.startswith("\u0120")
        )
    model.save_pretrained(out)
    return out


def main(argv: list[str]) -> None:
    """``python tests/tiny_model.py [OUT_DIR] [--hidden N] [--text-tokens]``."""
    import argparse

    parser = argparse.ArgumentParser(description="Build a tiny random-weight Qwen3-MoE offline.")
    parser.add_argument("out_dir", nargs="?", default="tiny-qwen3-moe")
    parser.add_argument(
        "--hidden", type=int, default=64, help="hidden size (head_dim = hidden / 4)"
    )
    parser.add_argument(
        "--text-tokens",
        action="store_true",
        help="every token decodes to text on its own (greedy output always streams text)",
    )
    parser.add_argument("--layers", type=int, default=2, help="decoder layers")
    args = parser.parse_args(argv)
    print(
        build_tiny_model(
            args.out_dir, hidden=args.hidden, layers=args.layers, text_tokens=args.text_tokens
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
