"""UBE tokenizers in ``transformers``: :class:`UbeTokenizer`, a ``PreTrainedTokenizer``
backed by the Cython encoder and decoder of :class:`~ube_stream.Tokenizer`, for
every substrate (``ube``, ``utf8``, ``utf16``).

    from ube_stream.hf import UbeTokenizer
    tok = UbeTokenizer.from_file("tok.json")          # or UbeTokenizer(tokenizer=Tokenizer)
    batch = tok(["Debian 性能", "বাংলা"], padding=True, return_tensors="pt")
    tok.save_pretrained("my-tokenizer/")
    AutoTokenizer.from_pretrained("my-tokenizer/")    # after import ube_stream: registered

Ids are those of ``Tokenizer.encode``.  Special tokens written in the text are
recognised, as HF tokenizers do (``split_special_tokens=True`` encodes them as
text instead).  Roles (``eos_token``, ``bos_token``, ``pad_token``,
``unk_token``) default to the tokenizer's special tokens with the usual names
(``<|endoftext|>`` is EOS, ``<|pad|>`` pad, else pad is EOS); pass them to
override.  ``add_bos`` / ``add_eos`` put BOS / EOS around every sequence when
``add_special_tokens=True`` (default: neither, as ``Tokenizer.encode``).

A saved directory holds ``ube_tokenizer.json`` (our tokenizer file),
``tokenizer_config.json`` (``tokenizer_class: UbeTokenizer``),
``special_tokens_map.json`` and ``tokenization_ube.py``, a self-contained module
(one absolute import of this class) that ``AutoTokenizer.from_pretrained(dir,
trust_remote_code=True)`` runs in a process that never imported ube_stream (it
needs ube-stream installed where it runs).  Importing this module registers the
class with ``AutoTokenizer`` (:func:`register`); ``import ube_stream`` does so as
soon as transformers' auto module is imported, so no remote code is needed there.

Needs ``transformers`` 4.46 or newer, 4.x or 5.x (``pip install "ube-stream[hf]"``);
``import ube_stream`` never imports it.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

try:
    from transformers import AutoTokenizer, PretrainedConfig, PreTrainedTokenizer
    from transformers.generation.streamers import BaseStreamer
    from transformers.tokenization_utils_base import AddedToken, BatchEncoding, PaddingStrategy, TruncationStrategy
except ImportError as exc:  # pragma: no cover - exercised only without transformers
    raise ImportError(f"ube_stream.hf needs transformers ({exc}); install it with "
                      "pip install \"ube-stream[hf]\"") from exc

from .storage import atomic_write_text
from .tokenizer import Tokenizer, as_tokenizer
from .tokenizer.export import ROLE_NAMES as _ROLE_NAMES
from .tokenizer.export import default_roles

__all__ = ["UbeTokenizer", "UbeStreamer", "UbeTokenizerConfig", "register", "default_roles", "TOKENIZER_FILE",
           "MODULE_FILE"]

TOKENIZER_FILE = "ube_tokenizer.json"
MODULE_FILE = "tokenization_ube.py"
_MODULE_TEXT = ('"""Loads ube-stream\'s UbeTokenizer (pip install "ube-stream[hf]") for '
                'AutoTokenizer(trust_remote_code=True)."""\n'
                "from ube_stream.hf import UbeTokenizer\n\n__all__ = [\"UbeTokenizer\"]\n")

TextLike = Union[str, Sequence[str], Sequence[int]]


def _windows(ids: List[int], width: Optional[int], stride: int, side: str) -> List[List[int]]:
    """``ids`` cut as HF tokenizers' ``Encoding.truncate`` does: windows of ``width``
    tokens whose starts step by ``width - stride``, from the right end when ``side`` is
    ``"left"``; the last window is the one that reaches the end.

    >>> _windows(list(range(10)), 4, 1, "right")
    [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]]
    >>> _windows(list(range(10)), 4, 1, "left")
    [[6, 7, 8, 9], [3, 4, 5, 6], [0, 1, 2, 3]]
    """
    if width is None or len(ids) <= width:
        return [list(ids)]
    step, total = width - stride, len(ids)
    out: List[List[int]] = []
    if side == "left":
        for stop in range(total, 0, -step):
            start = max(stop - width, 0)
            out.append(list(ids[start:stop]))
            if start == 0:
                break
        return out
    for start in range(0, total, step):
        stop = min(start + width, total)
        out.append(list(ids[start:stop]))
        if stop == total:
            break
    return out


class UbeTokenizer(PreTrainedTokenizer):
    """A ``transformers`` tokenizer over an ube-stream :class:`~ube_stream.Tokenizer`.

    Args:
        ube_file: path of a tokenizer file (ours, a HF ``tokenizer.json`` or a
            tiktoken rank file: anything :func:`~ube_stream.tokenizer.as_tokenizer` reads).
        tokenizer: a :class:`~ube_stream.Tokenizer` instead of ``ube_file``.
        add_bos, add_eos: put BOS before / EOS after each sequence when
            ``add_special_tokens=True``.
        decode_errors: ``"replace"`` (default: an invalid byte sequence, e.g. from
            a sampled model, becomes U+FFFD) or ``"strict"`` (raise).
        eos_token, bos_token, pad_token, unk_token: override the default roles
            (:func:`default_roles`); each must be a special token of the tokenizer.
    """

    vocab_files_names = {"ube_file": TOKENIZER_FILE}
    model_input_names = ["input_ids", "attention_mask"]
    padding_side = "right"

    def __init__(self, ube_file: Optional[str] = None, *, tokenizer: Optional[Tokenizer] = None,
                 add_bos: bool = False, add_eos: bool = False, decode_errors: str = "replace",
                 **kwargs: Any):
        if (ube_file is None) == (tokenizer is None):
            raise ValueError("UbeTokenizer needs exactly one of ube_file (a tokenizer file) or tokenizer "
                             "(a ube_stream.Tokenizer)")
        if decode_errors not in ("strict", "replace"):
            raise ValueError(f"decode_errors must be 'strict' or 'replace', got {decode_errors!r}")
        self.ube: Tokenizer = as_tokenizer(tokenizer if tokenizer is not None else ube_file)  # type: ignore[arg-type]
        specials = self.ube.special_tokens
        for role, default in default_roles(specials).items():
            value = kwargs.get(role, default)
            text = value.content if isinstance(value, AddedToken) else value
            if text is not None and text not in specials:
                raise ValueError(f"{role} {text!r} is not a special token of this tokenizer (it has "
                                 f"{list(specials) or 'none'}); UbeTokenizer cannot add tokens")
            kwargs[role] = text
        self.add_bos, self.add_eos = bool(add_bos), bool(add_eos)
        self.decode_errors = decode_errors
        self._special_ids = frozenset(specials.values())
        self._vocab: Optional[Dict[str, int]] = None
        self._added_tokens_decoder = {
            i: AddedToken(t, special=True, normalized=False, lstrip=False, rstrip=False, single_word=False)
            for t, i in specials.items()}
        kwargs.pop("added_tokens_decoder", None)  # ours, from the tokenizer file
        kwargs.setdefault("clean_up_tokenization_spaces", False)
        kwargs.setdefault("token_type_ids_pattern", "all_zeros")
        super().__init__(add_bos=self.add_bos, add_eos=self.add_eos, decode_errors=decode_errors, **kwargs)
        self._auto_map = {"AutoTokenizer": [f"{MODULE_FILE[:-3]}.UbeTokenizer", None]}

    @classmethod
    def from_file(cls, path: Union[str, "os.PathLike[str]"], **kwargs: Any) -> "UbeTokenizer":
        """The class over a tokenizer file (ours, HF ``tokenizer.json`` or tiktoken ranks)."""
        return cls(tokenizer=as_tokenizer(path), **kwargs)

    # ------------------------------------------------------------------ vocabulary
    @property
    def vocab_size(self) -> int:
        return self.ube.vocab_size

    def __len__(self) -> int:
        # every id, special tokens included (transformers 4.x keeps a count that _add_tokens would update)
        return self.ube.vocab_size

    def get_vocab(self) -> Dict[str, int]:
        if self._vocab is None:
            self._vocab = self.ube.vocab()
        return dict(self._vocab)

    def _add_tokens(self, new_tokens: Any, special_tokens: bool = False) -> int:
        known = set(self.ube.special_tokens) | set(self.get_vocab())
        new = [str(t) for t in new_tokens if str(t) not in known]
        if new:
            raise ValueError(f"UbeTokenizer cannot add tokens ({new[:5]}): its vocabulary is the ube-stream "
                             "tokenizer's; train one with these special tokens (special_tokens=[...])")
        return 0

    def _convert_token_to_id(self, token: str) -> int:
        vocab = self._vocab if self._vocab is not None else self.get_vocab()
        if token not in vocab:
            raise ValueError(f"{token!r} is not a token of this vocabulary (tokens are symbol strings, as "
                             "convert_ids_to_tokens gives them)")
        return vocab[token]

    def _convert_id_to_token(self, index: int) -> str:
        return self.ube.token_symbols(int(index))

    def convert_tokens_to_string(self, tokens: List[str]) -> str:
        return self.ube.decode([self._convert_token_to_id_with_added_voc(t) for t in tokens],
                               errors=self.decode_errors)

    def _tokenize(self, text: str, **kwargs: Any) -> List[str]:
        return [self.ube.token_symbols(i) for i in self.ube.encode_ordinary(text).tolist()]

    # pair / add_special_tokens come (and are ignored) through **kwargs, not as named parameters
    def tokenize(self, text: str, **kwargs: Any) -> List[str]:  # type: ignore[override]
        """Token strings (symbol strings) of ``text``; special tokens in it are recognised
        unless ``split_special_tokens=True``."""
        return [self.ube.token_symbols(i) for i in self._ids(text, kwargs.get("split_special_tokens"))]

    # ------------------------------------------------------------------ encoding
    def _ids(self, text: str, split_special_tokens: Optional[bool] = None) -> List[int]:
        split = self.split_special_tokens if split_special_tokens is None else split_special_tokens
        if split:
            return self.ube.encode_ordinary(text).tolist()
        return self.ube.encode(text, allowed_special="all").tolist()

    def _input_ids(self, item: Any, is_split_into_words: bool, split: Optional[bool]) -> List[int]:
        if isinstance(item, str):
            return self._ids(item, split)
        if isinstance(item, (list, tuple)):
            if not item or isinstance(item[0], int):
                return [int(i) for i in item]
            if isinstance(item[0], str):
                if is_split_into_words:
                    return [i for word in item for i in self._ids(word, split)]
                return [self._convert_token_to_id_with_added_voc(t) for t in item]
        raise ValueError(f"input must be a string, a list of strings or a list of ints, got {type(item).__name__}")

    # return_offsets_mapping / split_special_tokens arrive in **kwargs, not as named parameters
    def _encode_plus(self, text: Any, text_pair: Any = None, add_special_tokens: bool = True,  # type: ignore[override]
                     padding_strategy: PaddingStrategy = PaddingStrategy.DO_NOT_PAD,
                     truncation_strategy: TruncationStrategy = TruncationStrategy.DO_NOT_TRUNCATE,
                     max_length: Optional[int] = None, stride: int = 0, is_split_into_words: bool = False,
                     pad_to_multiple_of: Optional[int] = None, padding_side: Optional[str] = None,
                     return_tensors: Any = None, return_token_type_ids: Optional[bool] = None,
                     return_attention_mask: Optional[bool] = None, return_overflowing_tokens: bool = False,
                     return_special_tokens_mask: bool = False, return_length: bool = False,
                     verbose: bool = True, **kwargs: Any) -> BatchEncoding:
        """Everything ``__call__``/``encode`` do, with the ids from the Cython encoder."""
        split = kwargs.pop("split_special_tokens", None)
        batched = isinstance(text, (list, tuple)) and (
            not text or (isinstance(text[0], (list, tuple)) if is_split_into_words
                         else isinstance(text[0], (str, list, tuple))))
        common: Dict[str, Any]
        common = dict(add_special_tokens=add_special_tokens, truncation=truncation_strategy.value,
                      max_length=max_length, stride=stride, return_token_type_ids=return_token_type_ids,
                      return_overflowing_tokens=return_overflowing_tokens,
                      return_special_tokens_mask=return_special_tokens_mask, return_length=return_length,
                      verbose=verbose)
        if return_overflowing_tokens:
            items = list(text) if batched else [text]
            return self._encode_windows(
                [self._input_ids(item, is_split_into_words, split) for item in items],
                text_pair is not None, add_special_tokens=add_special_tokens,
                truncate=truncation_strategy != TruncationStrategy.DO_NOT_TRUNCATE, max_length=max_length,
                stride=stride, padding=padding_strategy.value, pad_to_multiple_of=pad_to_multiple_of,
                padding_side=padding_side, return_tensors=return_tensors,
                return_attention_mask=return_attention_mask, return_special_tokens_mask=return_special_tokens_mask,
                return_length=return_length)
        if not batched:
            first = self._input_ids(text, is_split_into_words, split)
            second = None if text_pair is None else self._input_ids(text_pair, is_split_into_words, split)
            return self.prepare_for_model(first, pair_ids=second, padding=padding_strategy.value,
                                          pad_to_multiple_of=pad_to_multiple_of, padding_side=padding_side,
                                          return_tensors=return_tensors, prepend_batch_axis=True,
                                          return_attention_mask=return_attention_mask, **common)
        if text_pair is not None and (not isinstance(text_pair, (list, tuple)) or len(text_pair) != len(text)):
            raise ValueError("when text is a batch, text_pair must be a batch of the same length")
        pairs = list(text_pair) if text_pair is not None else [None] * len(text)
        outputs: Dict[str, List[Any]] = {}
        for item, pair in zip(text, pairs):
            if (pair is None and isinstance(item, tuple) and len(item) == 2
                    and all(isinstance(p, (str, list, tuple)) for p in item)):
                item, pair = item
            first = self._input_ids(item, is_split_into_words, split)
            second = None if pair is None else self._input_ids(pair, is_split_into_words, split)
            encoded = self.prepare_for_model(first, pair_ids=second, padding=PaddingStrategy.DO_NOT_PAD.value,
                                             return_attention_mask=False, **common)
            for key, value in encoded.items():
                outputs.setdefault(key, []).append(value)
        padded = self.pad(outputs, padding=padding_strategy.value, max_length=max_length,
                          pad_to_multiple_of=pad_to_multiple_of, padding_side=padding_side,
                          return_attention_mask=return_attention_mask)
        # pad() returns a BatchEncoding (a UserDict), which the stub's dict annotation does not admit
        return BatchEncoding(padded, tensor_type=return_tensors)  # type: ignore[arg-type]

    def _encode_windows(self, sequences: List[List[int]], has_pair: bool, *, add_special_tokens: bool,
                        truncate: bool, max_length: Optional[int], stride: int, padding: str,
                        pad_to_multiple_of: Optional[int], padding_side: Optional[str], return_tensors: Any,
                        return_attention_mask: Optional[bool], return_special_tokens_mask: bool,
                        return_length: bool) -> BatchEncoding:
        """``return_overflowing_tokens=True`` as HF's fast tokenizers give it: each sequence
        cut into windows of ``max_length`` (special tokens included) that overlap by
        ``stride`` tokens, one row per window, and ``overflow_to_sample_mapping`` naming
        the sequence of each row."""
        if has_pair:
            raise ValueError("return_overflowing_tokens with text pairs is not supported by UbeTokenizer; "
                             "encode the pairs without it, or window each text on its own")
        special = self.num_special_tokens_to_add() if add_special_tokens else 0
        width = None
        if truncate and max_length is not None:
            width = max_length - special
            if width <= 0 or stride >= width:
                raise ValueError(f"max_length={max_length} leaves {width} tokens per window after {special} "
                                 f"special tokens; stride ({stride}) must be smaller than that")
        outputs: Dict[str, List[Any]] = {"input_ids": [], "overflow_to_sample_mapping": []}
        for sample, ids in enumerate(sequences):
            for window in _windows(ids, width, stride, self.truncation_side):
                row = self.build_inputs_with_special_tokens(window) if add_special_tokens else window
                outputs["input_ids"].append(row)
                outputs["overflow_to_sample_mapping"].append(sample)
                if return_special_tokens_mask:
                    mask = (self.get_special_tokens_mask(window) if add_special_tokens else [0] * len(window))
                    outputs.setdefault("special_tokens_mask", []).append(mask)
                if return_length:
                    outputs.setdefault("length", []).append(len(row))
        padded = self.pad(outputs, padding=padding, max_length=max_length, pad_to_multiple_of=pad_to_multiple_of,
                          padding_side=padding_side, return_attention_mask=return_attention_mask)
        return BatchEncoding(padded, tensor_type=return_tensors)  # type: ignore[arg-type]

    def _batch_encode_plus(self, batch_text_or_text_pairs: Any, **kwargs: Any) -> BatchEncoding:
        """transformers 4.x sends batches here (5.x sends everything to ``_encode_plus``)."""
        if kwargs.pop("return_offsets_mapping", False):
            raise NotImplementedError("return_offsets_mapping is not available from UbeTokenizer (a Python "
                                      "tokenizer, as in transformers' own slow tokenizers)")
        return self._encode_plus(list(batch_text_or_text_pairs), **kwargs)

    def build_inputs_with_special_tokens(self, token_ids_0: List[int],
                                         token_ids_1: Optional[List[int]] = None) -> List[int]:
        bos = [self.bos_token_id] if self.add_bos and self.bos_token_id is not None else []
        eos = [self.eos_token_id] if self.add_eos and self.eos_token_id is not None else []
        out = bos + list(token_ids_0) + eos
        if token_ids_1 is not None:
            out += bos + list(token_ids_1) + eos
        return out

    def get_special_tokens_mask(self, token_ids_0: List[int], token_ids_1: Optional[List[int]] = None,
                                already_has_special_tokens: bool = False) -> List[int]:
        if already_has_special_tokens:
            ids = list(token_ids_0) + list(token_ids_1 or [])
            return [int(i in self._special_ids) for i in ids]
        bos = [1] if self.add_bos and self.bos_token_id is not None else []
        eos = [1] if self.add_eos and self.eos_token_id is not None else []
        mask = bos + [0] * len(token_ids_0) + eos
        if token_ids_1 is not None:
            mask += bos + [0] * len(token_ids_1) + eos
        return mask

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        return len(self.build_inputs_with_special_tokens([], [] if pair else None))

    # ------------------------------------------------------------------ decoding
    def _decode(self, token_ids: Any, skip_special_tokens: bool = False,
                clean_up_tokenization_spaces: Optional[bool] = None, **kwargs: Any) -> str:
        ids = [int(token_ids)] if isinstance(token_ids, int) else [int(i) for i in token_ids]
        if skip_special_tokens:
            ids = [i for i in ids if i not in self._special_ids]
        text = self.ube.decode(ids, errors=self.decode_errors)
        if clean_up_tokenization_spaces:
            text = self.clean_up_tokenization(text)
        return text

    def stream_decoder(self) -> Any:
        """The incremental decoder (``.feed(id) -> str``, ``.flush()``): it never returns
        part of a character."""
        return self.ube.stream_decoder(errors=self.decode_errors)

    # ------------------------------------------------------------------ saving
    def save_vocabulary(self, save_directory: str, filename_prefix: Optional[str] = None) -> Tuple[str, ...]:
        """Write our tokenizer file and the module ``AutoTokenizer`` imports."""
        if not os.path.isdir(save_directory):
            raise ValueError(f"{save_directory}: not a directory")
        path = os.path.join(save_directory, (filename_prefix + "-" if filename_prefix else "") + TOKENIZER_FILE)
        self.ube.save(path)
        module = os.path.join(save_directory, MODULE_FILE)
        atomic_write_text(module, _MODULE_TEXT)
        return path, module

    def save_pretrained(self, save_directory: Union[str, "os.PathLike[str]"], *args: Any,
                        **kwargs: Any) -> Tuple[str, ...]:
        """HF's ``save_pretrained`` plus ``special_tokens_map.json`` (the roles).

        The folder's remote-code file is always our own ``tokenization_ube.py``: a class
        loaded with ``trust_remote_code=True`` is marked for the auto classes, and HF
        would then copy this module's source and follow its relative imports into the
        package instead."""
        self._auto_class = None   # shadows the class attribute register_for_auto_class sets
        try:
            files = tuple(super().save_pretrained(save_directory, *args, **kwargs))
        finally:
            del self._auto_class
        from .storage import atomic_write_json

        prefix = kwargs.get("filename_prefix")
        path = os.path.join(os.fspath(save_directory), (prefix + "-" if prefix else "") + "special_tokens_map.json")
        roles = {role: getattr(self, role) for role in _ROLE_NAMES if getattr(self, role) is not None}
        atomic_write_json(path, roles)
        return files + (path,) if path not in files else files


class UbeStreamer(BaseStreamer):
    """A ``generate(streamer=...)`` streamer that decodes with the stream decoder, so
    it never shows part of a character: ``on_text(piece)`` gets each completed piece
    (default: print it).  ``skip_prompt`` drops the prompt ``generate`` sends first;
    ``.text`` holds everything streamed so far."""

    def __init__(self, tokenizer: UbeTokenizer, *, skip_prompt: bool = False,
                 skip_special_tokens: bool = False, on_text: Optional[Callable[[str], Any]] = None):
        self.tokenizer = tokenizer
        self.skip_prompt = skip_prompt
        self.skip_special_tokens = skip_special_tokens
        self.on_text = on_text if on_text is not None else (lambda piece: print(piece, end="", flush=True))
        self.decoder = tokenizer.stream_decoder()
        self.pieces: List[str] = []
        self._first = True

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    def _emit(self, piece: str) -> None:
        if piece:
            self.pieces.append(piece)
            self.on_text(piece)

    def put(self, value: Any) -> None:
        ids = value.tolist() if hasattr(value, "tolist") else list(value)
        if ids and isinstance(ids[0], list):
            if len(ids) > 1:
                raise ValueError("UbeStreamer streams one sequence (batch size 1)")
            ids = ids[0]
        if self._first:
            self._first = False
            if self.skip_prompt:
                return
        for token in ids:
            if self.skip_special_tokens and int(token) in self.tokenizer._special_ids:
                self._emit(self.decoder.flush())
                continue
            self._emit(self.decoder.feed(int(token)))

    def end(self) -> None:
        self._emit(self.decoder.flush())


class UbeTokenizerConfig(PretrainedConfig):
    """The config class :class:`UbeTokenizer` is registered under (``AutoTokenizer``
    keys its registry by config class); a saved folder names the tokenizer class,
    so no ``config.json`` is needed."""

    model_type = "ube_tokenizer"


def register() -> None:
    """Make ``AutoTokenizer.from_pretrained(folder)`` find :class:`UbeTokenizer` by the
    ``tokenizer_class`` of a saved folder, without ``trust_remote_code``.  Runs when this
    module is imported; ``import ube_stream`` calls it once transformers' auto module
    is imported (it never imports transformers itself)."""
    AutoTokenizer.register(UbeTokenizerConfig, slow_tokenizer_class=UbeTokenizer, exist_ok=True)


register()
