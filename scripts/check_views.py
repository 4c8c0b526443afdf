"""Checks rendered views against the providers' own request types.

Usage: check_views.py FILE [FILE ...]
       check_views.py --stream

Each FILE holds a JSON array of {"format": "openai" | "openai_responses" | "anthropic",
"view": {...}}. An OpenAI view's messages are validated as `list[ChatCompletionMessageParam]`
of the official `openai` SDK, a Responses view's input as its `ResponseInputParam`, an
Anthropic view as `MessageCreateParamsNonStreaming` of the official `anthropic` SDK (with a
model and max_tokens added) and each of its content blocks as a `ContentBlockParam` (the
message type also takes the SDK's response models, which let unknown keys through), all
strictly: a field the type does not know is an error. A call id used twice in one Anthropic or
Responses request is refused too, as those APIs do. Exit status 0 when every view passes; 1
and one line per failure otherwise.

With --stream (how `ctxd replay` runs it, one process for a whole replay), it prints `ready`
and the SDKs' versions, then reads one {"format", "view"} object a line from stdin and answers
each with one line: `ok`, or `refused ` and why.
"""

import json
import sys
import typing

from anthropic.types import ContentBlockParam
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputParam
from pydantic import ConfigDict, TypeAdapter, ValidationError
from typing_extensions import is_typeddict


def forbid_unknown_fields(tp, seen=None):
    """Makes every TypedDict reachable from `tp` refuse keys it does not declare (pydantic
    ignores them by default)."""
    seen = set() if seen is None else seen
    if id(tp) in seen:
        return
    seen.add(id(tp))
    if is_typeddict(tp):
        tp.__pydantic_config__ = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
        for hint in typing.get_type_hints(tp, include_extras=True).values():
            forbid_unknown_fields(hint, seen)
        return
    for arg in typing.get_args(tp):
        forbid_unknown_fields(arg, seen)


for request_type in (
    ChatCompletionMessageParam,
    ResponseInputParam,
    MessageCreateParamsNonStreaming,
    ContentBlockParam,
):
    forbid_unknown_fields(request_type)
OPENAI = TypeAdapter(list[ChatCompletionMessageParam])
RESPONSES = TypeAdapter(ResponseInputParam)
ANTHROPIC = TypeAdapter(MessageCreateParamsNonStreaming)
ANTHROPIC_BLOCK = TypeAdapter(ContentBlockParam)


def consume(value):
    """Walks a validated value: pydantic validates `Iterable` fields lazily, as they are read."""
    if isinstance(value, dict):
        return {k: consume(v) for k, v in value.items()}
    if isinstance(value, (str, bytes, int, float, bool)) or value is None:
        return value
    try:
        return [consume(v) for v in value]
    except TypeError:
        return value


def check(entry):
    view = entry["view"]
    if entry["format"] == "openai":
        if set(view) != {"messages"}:
            raise ValueError(f"an OpenAI view has only `messages`, not {sorted(view)}")
        consume(OPENAI.validate_python(view["messages"]))
    elif entry["format"] == "openai_responses":
        if set(view) != {"input"}:
            raise ValueError(f"a Responses view has only `input`, not {sorted(view)}")
        consume(RESPONSES.validate_python(view["input"]))
        once_a_request(
            item.get("call_id")
            for item in view["input"]
            if item.get("type") in ("function_call", "custom_tool_call", "shell_call", "apply_patch_call")
        )
    elif entry["format"] == "anthropic":
        consume(ANTHROPIC.validate_python({"model": "claude-sonnet-4-5", "max_tokens": 1024, **view}))
        for message in view["messages"]:
            if isinstance(message["content"], list):
                for block in message["content"]:
                    consume(ANTHROPIC_BLOCK.validate_python(block))
        once_a_request(
            block.get("id")
            for message in view["messages"]
            if isinstance(message["content"], list)
            for block in message["content"]
            if block.get("type") == "tool_use"
        )
    else:
        raise ValueError(f"unknown format {entry['format']!r}")


def once_a_request(ids):
    """A rule of the APIs that their types cannot say: a call id once a request (Anthropic
    answers 400 "`tool_use` ids must be unique"; Responses pairs outputs by `call_id`)."""
    seen = set()
    for call_id in ids:
        if call_id in seen:
            raise ValueError(f"call id {call_id!r} is used twice in one request")
        seen.add(call_id)


def main(paths):
    failures = 0
    checked = 0
    for path in paths:
        with open(path, encoding="utf-8") as f:
            entries = json.load(f)
        for i, entry in enumerate(entries):
            checked += 1
            try:
                check(entry)
            except (ValidationError, ValueError, KeyError) as e:
                failures += 1
                first = str(e).splitlines()[:6]
                print(f"{path}[{i}] ({entry.get('format')}): " + " | ".join(first))
    print(f"{checked} views checked, {failures} failed")
    return 1 if failures else 0


def stream():
    import anthropic
    import openai

    print(f"ready openai {openai.__version__} anthropic {anthropic.__version__}", flush=True)
    for line in sys.stdin:
        try:
            check(json.loads(line))
            answer = "ok"
        except (ValidationError, ValueError, KeyError, TypeError) as e:
            answer = "refused " + " | ".join(str(e).splitlines()[:6])
        print(answer, flush=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--stream"]:
        sys.exit(stream())
    sys.exit(main(sys.argv[1:]))
