"""A tiny causal LM built locally (no download): a byte-level BPE tokenizer trained on a
few sentences that include NO-RESPONSE, with a chat template, and a two-layer Llama with
random weights. Used by the annotator tests as a real model."""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}<|end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

TEXT = [
    "You are given a question and you must respond based on the provided documents.",
    "If none of the documents contain the answer, please respond with NO-RESPONSE.",
    "NO-RESPONSE NO-RESPONSE NO-RESPONSE",
    "Document: Paris is the capital of France. Question: What is the capital? Answer: Paris",
    "The Great Gatsby takes place on Long Island in the summer of 1922.",
    "Follow the Leader was released on August 18, 1998 by Korn.",
    "Respond directly without providing any premise or explanation.",
    "Do not try to respond based on your own knowledge.",
]


def make_tiny_lm(
    path: Path,
    *,
    seed: int = 0,
    max_positions: int = 512,
    hidden_size: int = 32,
    layers: int = 2,
) -> Path:
    """Save a tokenizer and a random Llama (two layers of width 32 unless told otherwise)
    under ``path``; returns ``path``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<pad>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(TEXT * 20, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        additional_special_tokens=specials[3:],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = max_positions
    fast.save_pretrained(path)
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=max(4, hidden_size // 64),
        num_key_value_heads=max(4, hidden_size // 64) // 2,
        max_position_embeddings=max_positions,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
    )
    model = LlamaForCausalLM(config)
    no = fast.encode("NO-RESPONSE", add_special_tokens=False)[0]
    with torch.no_grad():  # point NO's output row along the typical last hidden state,
        # so that p(NO) is far from 0 and differs from prompt to prompt
        prompts = [
            fast.apply_chat_template(
                [{"role": "user", "content": t}], add_generation_prompt=True, return_dict=False
            )
            for t in TEXT
        ]
        hidden = torch.stack(
            [model.model(torch.tensor([ids])).last_hidden_state[0, -1] for ids in prompts]
        ).mean(0)
        model.lm_head.weight.mul_(5)
        model.lm_head.weight[no] = hidden / hidden.norm() ** 2 * 7.0
    model.save_pretrained(path)
    return path
