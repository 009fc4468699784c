"""The tokenizer: the :class:`Tokenizer` object (``core``), its file format and
fingerprint (``file_format``), exports for other tools (``export``), existing
models' tokenizers (``pretrained``: HF ``tokenizer.json``, tiktoken ranks) and
incremental decoding (``stream_decoder``)."""
from .core import Tokenizer, as_tokenizer, derive_tokens
from .file_format import FORMAT_NAME, FORMAT_VERSION
from .stream_decoder import StreamDecoder

__all__ = ["Tokenizer", "as_tokenizer", "derive_tokens", "StreamDecoder", "FORMAT_NAME", "FORMAT_VERSION"]
