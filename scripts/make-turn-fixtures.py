#!/usr/bin/env python3
"""Writes the provider-native session fixtures under tests/fixtures/turns/.

Usage: make-turn-fixtures.py [CORPUS_DIR]

CORPUS_DIR is the development corpus of recorded agent sessions (default: ../shared/corpus-dev
relative to the repository root; a relative CORPUS_DIR argument is taken relative to the current
directory). Standard library only. The output is deterministic: running it twice writes the same
bytes. The fixtures are committed, so tests never need the corpus.

Four files, each one JSON object
    {"name", "format", "source", "system"?, "tools", "messages"}:

- claude_code_thinking.json (format "anthropic"): a Claude Code session of the corpus as
  Anthropic Messages API history, with synthesised thinking / redacted_thinking blocks.
- agents_sdk_responses.json (format "openai_responses"): a tau-bench session as the `input`
  items the OpenAI Agents SDK sends to the Responses API with store=false, with synthesised
  reasoning items.
- computer_use_screenshots.json (format "anthropic"): a synthesised computer-use session whose
  tool results carry real 1280x800 PNG screenshots.
- codex_custom_tools.json (format "openai_responses"): a synthesised Codex-CLI-like session with
  `shell` function calls and freeform `apply_patch` custom tool calls.
"""

import base64
import hashlib
import json
import os
import struct
import sys
import zlib

SCRIPT_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(SCRIPT_DIR)
DEFAULT_CORPUS = os.path.join(REPO_ROOT, "..", "shared", "corpus-dev")
OUT_DIR = os.path.join(REPO_ROOT, "tests", "fixtures", "turns")

CLAUDE_SESSION = "claude_code_vsla__d7d349f9-c243-46e2-9a32-4a0eddfc634b.jsonl"
# Rows kept, as half-open ranges of corpus line indices. Both cuts are at user-turn boundaries:
# rows 84..163 (the third user request and its 40 tool round trips) are left out so the fixture
# stays near 100 messages and still holds both real empty tool results (rows 14 and 170).
CLAUDE_SEGMENTS = [(0, 84), (164, 183)]
TAU_SESSION = "tau_bench__gpt-4o-airline_task03_trial0.jsonl"

VSLA_ATTRIBUTION = (
    "Durban-Designer/vsla @ 18ef9cb1ee87f803e85e820b243f5ee56f3b062f, "
    "docs/history/raw_sessions/ (Claude Code session log d7d349f9-c243-46e2-9a32-4a0eddfc634b), "
    "MIT licence, (c) 2025 libvsla contributors; via the ctxd development corpus file "
    + CLAUDE_SESSION
)
TAU_ATTRIBUTION = (
    "sierra-research/tau-bench @ 59a200c6d575d595120f1cb70fea53cef0632f6b, "
    "historical_trajectories/gpt-4o-airline.json (task 3, trial 0), MIT licence, (c) 2024 Sierra; "
    "via the ctxd development corpus file " + TAU_SESSION
)


# ---------------------------------------------------------------------------------------------
# deterministic pseudo-random material


def digest_stream(seed, n):
    """n bytes derived from seed by chained SHA-256."""
    out = b""
    block = hashlib.sha256(seed.encode("utf-8")).digest()
    while len(out) < n:
        out += block
        block = hashlib.sha256(block + seed.encode("utf-8")).digest()
    return out[:n]


def det_int(seed, lo, hi):
    v = int.from_bytes(hashlib.sha256(seed.encode("utf-8")).digest()[:8], "big")
    return lo + v % (hi - lo + 1)


def b64(seed, lo, hi):
    """A standard base64 string of a deterministic length between lo and hi characters."""
    chars = det_int(seed + "#len", lo, hi)
    n = chars * 3 // 4
    return base64.b64encode(digest_stream(seed, n)).decode("ascii")


def thinking_signature(seed):
    # Anthropic signatures are base64 of a protobuf-framed blob; they typically start "Eq".
    raw = b"\x12" + bytes([det_int(seed + "#b", 0x80, 0xFF)]) + digest_stream("sig:" + seed, det_int(seed + "#n", 150, 290))
    return base64.b64encode(raw).decode("ascii")


def redacted_data(seed):
    raw = b"\x12" + digest_stream("redacted:" + seed, det_int(seed + "#n", 300, 420))
    return base64.b64encode(raw).decode("ascii")


def encrypted_content(seed):
    # OpenAI encrypted reasoning content is a Fernet token: urlsafe base64 starting "gAAAAAB".
    n = det_int(seed + "#n", 230, 590)
    raw = b"\x80\x00\x00\x00\x00" + digest_stream("enc:" + seed, n)
    return base64.urlsafe_b64encode(raw).decode("ascii")


def hex_id(prefix, seed, n=48):
    return prefix + hashlib.sha256(seed.encode("utf-8")).hexdigest()[:n]


BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def toolu_id(seed):
    v = int.from_bytes(hashlib.sha256(seed.encode("utf-8")).digest(), "big")
    s = ""
    for _ in range(22):
        v, r = divmod(v, 62)
        s += BASE62[r]
    return "toolu_01" + s


# ---------------------------------------------------------------------------------------------
# corpus and tool schemas


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def json_type(v):
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return "null"


def infer_schema(samples):
    """A JSON schema covering every sample value (same-typed samples expected)."""
    types = []
    for s in samples:
        t = json_type(s)
        if t not in types:
            types.append(t)
    if types == ["integer", "number"] or types == ["number", "integer"]:
        types = ["number"]
    if len(types) != 1:
        return {}
    t = types[0]
    if t == "object":
        return object_schema(samples)
    if t == "array":
        items = [x for s in samples for x in s]
        schema = {"type": "array"}
        if items:
            schema["items"] = infer_schema(items)
        return schema
    return {"type": t}


def object_schema(samples, descriptions=None):
    keys = []
    for s in samples:
        for k in s:
            if k not in keys:
                keys.append(k)
    props = {}
    for k in keys:
        props[k] = infer_schema([s[k] for s in samples if k in s])
        if descriptions and k in descriptions:
            props[k]["description"] = descriptions[k]
    required = [k for k in keys if all(k in s for s in samples)]
    schema = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return schema


CLAUDE_CODE_TOOLS = {
    "Bash": "Executes a given bash command in a persistent shell session with optional timeout.",
    "Read": "Reads a file from the local filesystem. Returns the content with line numbers (cat -n format).",
    "Write": "Writes a file to the local filesystem, overwriting the existing file if there is one.",
    "Edit": "Performs exact string replacements in a file. old_string must be unique unless replace_all is set.",
    "MultiEdit": "Makes multiple exact string replacements to a single file in one operation.",
    "Grep": "A search tool built on ripgrep: searches file contents with regular expressions.",
    "Glob": "Fast file pattern matching tool; returns matching file paths sorted by modification time.",
    "LS": "Lists files and directories in a given absolute path.",
    "TodoWrite": "Creates and manages a structured task list for the current coding session.",
    "Task": "Launches a sub-agent to handle a complex, multi-step task autonomously.",
}

TAU_TOOLS = {
    "get_user_details": "Get the details of a user, including their reservations.",
    "get_reservation_details": "Get the details of a reservation.",
    "search_direct_flight": "Search direct flights between two cities on a specific date.",
    "search_onestop_flight": "Search one-stop flights between two cities on a specific date.",
    "update_reservation_flights": "Update the flight information of a reservation.",
    "update_reservation_baggages": "Update the baggage information of a reservation.",
    "book_reservation": "Book a reservation.",
    "send_certificate": "Send a certificate to a user.",
    "calculate": "Calculate the result of a mathematical expression.",
    "think": "Use the tool to think about something. It will not obtain new information or change the database, but just append the thought to the log.",
}


def calls_by_name(rows):
    seen = {}
    for r in rows:
        for tc in r.get("tool_calls") or []:
            seen.setdefault(tc["name"], []).append(json.loads(tc["arguments"] or "{}"))
    return seen


# ---------------------------------------------------------------------------------------------
# thinking / reasoning text


def short(text, n):
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def describe_call(name, args):
    for key in ("file_path", "command", "pattern", "path", "reservation_id", "user_id", "expression", "description"):
        if key in args and isinstance(args[key], str):
            return f"{name} ({key}: {short(args[key], 70)})"
    if name == "TodoWrite":
        return "TodoWrite to update the task list"
    if name == "think":
        return "think to lay out my reasoning"
    if "origin" in args and "destination" in args:
        return f"{name} ({args['origin']} → {args['destination']} on {args.get('date', '?')})"
    return name


def synth_thinking(last_user_text, calls, prior_result):
    parts = []
    if last_user_text:
        parts.append(f'The user asked: "{short(last_user_text, 140)}".')
    if prior_result is not None:
        if prior_result.strip():
            parts.append(f"The last result was: {short(prior_result, 110)}")
        else:
            parts.append("The last command produced no output, which is expected for it.")
    steps = [describe_call(name, args) for name, args in calls]
    if len(steps) == 1:
        parts.append(f"Next I'll use {steps[0]}.")
    else:
        parts.append("Next I'll use " + ", then ".join(steps) + ".")
    return " ".join(parts)


# ---------------------------------------------------------------------------------------------
# Anthropic history helpers


def merge_same_role(messages):
    """Merges consecutive same-role messages; in a user message tool_result blocks go first."""
    out = []
    for m in messages:
        if out and out[-1]["role"] == m["role"]:
            out[-1]["content"].extend(m["content"])
        else:
            out.append({"role": m["role"], "content": list(m["content"])})
    for m in out:
        if m["role"] == "user":
            results = [b for b in m["content"] if b["type"] == "tool_result"]
            rest = [b for b in m["content"] if b["type"] != "tool_result"]
            m["content"] = results + rest
    return out


def check_anthropic(messages):
    """Strict alternation starting with user; every tool_use answered in the next user message,
    every tool_result answering a tool_use of the message just before it."""
    assert messages and messages[0]["role"] == "user", "must start with user"
    for i, m in enumerate(messages):
        assert m["role"] == ("user" if i % 2 == 0 else "assistant"), f"message {i} breaks alternation"
        assert m["content"], f"message {i} is empty"
        if m["role"] == "assistant":
            uses = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
            nxt = messages[i + 1]["content"] if i + 1 < len(messages) else []
            results = [b["tool_use_id"] for b in nxt if b["type"] == "tool_result"]
            if uses:
                assert i + 1 < len(messages), f"message {i}: tool_use with no following user message"
                assert results == uses, f"message {i}: results {results} do not answer {uses}"
            else:
                assert not results, f"message {i + 1}: tool_result without tool_use"
            kinds = [b["type"] for b in m["content"]]
            thinking = [k for k in kinds if k in ("thinking", "redacted_thinking")]
            assert kinds[: len(thinking)] == thinking, f"message {i}: thinking must come first"
    assert messages[0]["content"] and not any(b["type"] == "tool_result" for b in messages[0]["content"])


# ---------------------------------------------------------------------------------------------
# 1. Claude Code session → Anthropic Messages API


ERROR_PREFIXES = ("<tool_use_error>", "No changes to make:", "String to replace not found")


def is_error_text(text):
    if text.startswith(ERROR_PREFIXES):
        return True
    return text.startswith("Found ") and "matches of the string to replace, but replace_all is false" in text


def build_claude(corpus):
    rows_all = read_jsonl(os.path.join(corpus, CLAUDE_SESSION))
    rows = []
    for lo, hi in CLAUDE_SEGMENTS:
        rows.extend(rows_all[lo:hi])

    system = "\n\n".join(r["content"] for r in rows if r["role"] == "system") or None
    rows = [r for r in rows if r["role"] != "system"]

    # Which calls are answered before the next assistant row, and which results are orphans.
    dropped_calls, dropped_results = [], []
    answered = set()
    pending = set()
    for r in rows:
        if r["role"] == "assistant":
            pending = {tc["id"] for tc in r.get("tool_calls") or []}
        elif r["role"] == "tool":
            if r["tool_call_id"] in pending:
                answered.add(r["tool_call_id"])
            else:
                dropped_results.append(r["tool_call_id"])

    raw = []
    empty_seen = 0
    for r in rows:
        if r["role"] == "user":
            if r["content"]:
                raw.append({"role": "user", "content": [{"type": "text", "text": r["content"]}]})
        elif r["role"] == "assistant":
            blocks = []
            if r["content"]:
                blocks.append({"type": "text", "text": r["content"]})
            for tc in r.get("tool_calls") or []:
                if tc["id"] not in answered:
                    dropped_calls.append(tc["id"])
                    continue
                blocks.append({"type": "tool_use", "id": tc["id"], "name": tc["name"],
                               "input": json.loads(tc["arguments"] or "{}")})
            if blocks:
                raw.append({"role": "assistant", "content": blocks})
        elif r["role"] == "tool":
            if r["tool_call_id"] not in answered:
                continue
            block = {"type": "tool_result", "tool_use_id": r["tool_call_id"]}
            if r["content"]:
                block["content"] = r["content"]
                if is_error_text(r["content"]):
                    block["is_error"] = True
            else:
                # The corpus has two empty results here: the first omits `content`, the
                # second sends it as "" -- both shapes clients really send.
                if empty_seen % 2 == 1:
                    block["content"] = ""
                empty_seen += 1
            raw.append({"role": "user", "content": [block]})
    messages = merge_same_role(raw)
    assert messages[0]["role"] == "user"

    # Synthesised thinking on every assistant turn that issues tool calls; one of them carries a
    # redacted_thinking block instead.
    last_user_text, prior_result = None, None
    tool_turn = 0
    thinking_count = 0
    redacted_at = None
    for i, m in enumerate(messages):
        if m["role"] == "user":
            texts = [b["text"] for b in m["content"] if b["type"] == "text"]
            if texts:
                last_user_text = texts[-1]
                prior_result = None
            results = [b for b in m["content"] if b["type"] == "tool_result"]
            if results:
                c = results[-1].get("content", "")
                prior_result = c if isinstance(c, str) else ""
            continue
        calls = [(b["name"], b["input"]) for b in m["content"] if b["type"] == "tool_use"]
        if not calls:
            continue
        tool_turn += 1
        seed = f"claude_code_thinking:{i}"
        if tool_turn == 6:
            m["content"].insert(0, {"type": "redacted_thinking", "data": redacted_data(seed)})
            redacted_at = i
        else:
            text = synth_thinking(last_user_text, calls, prior_result)
            m["content"].insert(0, {"type": "thinking", "thinking": text, "signature": thinking_signature(seed)})
            thinking_count += 1
    check_anthropic(messages)

    used = calls_by_name(rows)
    tools = []
    for name in sorted(used):
        tools.append({
            "name": name,
            "description": CLAUDE_CODE_TOOLS.get(name, f"The {name} tool."),
            "input_schema": object_schema(used[name]),
        })

    segs = ", ".join(f"{lo}..{hi - 1}" for lo, hi in CLAUDE_SEGMENTS)
    source = (
        f"{VSLA_ATTRIBUTION}. Kept corpus rows {segs} (0-based lines; both cuts at user-turn "
        f"boundaries, the middle user turn and its tool round trips left out); the trailing "
        f"/exit local-command user rows are merged into one user message. Synthesised: the "
        f"thinking blocks ({thinking_count}, text derived from the last user text, last tool "
        f"result and the calls; signatures are base64 of SHA-256 material, not real "
        f"signatures) and one redacted_thinking block (message {redacted_at}), all absent from "
        f"the corpus, which dropped thinking; is_error set on results whose text is a Claude "
        f"Code edit error; tool definitions (descriptions written here, input_schema inferred "
        f"from the recorded arguments). Empty results: the first omits content, the second "
        f"has content \"\". Session had no system prompt in the log. Unanswered tool calls "
        f"dropped: {dropped_calls or 'none'}; orphan results dropped: {dropped_results or 'none'}."
    )
    fixture = {"name": "claude_code_thinking", "format": "anthropic", "source": source}
    if system:
        fixture["system"] = system
    fixture["tools"] = tools
    fixture["messages"] = messages
    return fixture


# ---------------------------------------------------------------------------------------------
# 2. tau-bench session → OpenAI Responses API input items (Agents SDK, store=false)


def summary_title(calls):
    name, args = calls[0]
    titles = {
        "get_user_details": "Looking up the customer profile",
        "get_reservation_details": "Checking reservation details",
        "search_direct_flight": "Searching direct flights",
        "search_onestop_flight": "Searching one-stop flights",
        "update_reservation_flights": "Updating the reservation flights",
        "calculate": "Calculating trip durations",
        "think": "Weighing the options",
    }
    return titles.get(name, f"Calling {name}")


def build_tau(corpus):
    rows = read_jsonl(os.path.join(corpus, TAU_SESSION))
    items = []
    answered = {r["tool_call_id"] for r in rows if r["role"] == "tool"}
    issued = {tc["id"] for r in rows for tc in r.get("tool_calls") or []}
    dropped_calls = sorted(issued - answered)
    dropped_results = sorted(answered - issued)
    last_user = None
    prior_result = None
    reasoning_count = 0
    for i, r in enumerate(rows):
        seed = f"agents_sdk_responses:{i}"
        if r["role"] == "system":
            items.append({"role": "system", "content": r["content"]})
        elif r["role"] == "user":
            items.append({"role": "user", "content": r["content"]})
            last_user, prior_result = r["content"], None
        elif r["role"] == "tool":
            if r["tool_call_id"] in dropped_results:
                continue
            items.append({"type": "function_call_output", "call_id": r["tool_call_id"], "output": r["content"]})
            prior_result = r["content"]
        elif r["role"] == "assistant":
            calls = [tc for tc in r.get("tool_calls") or [] if tc["id"] not in dropped_calls]
            parsed = [(tc["name"], json.loads(tc["arguments"] or "{}")) for tc in calls]
            if calls:
                text = synth_thinking(last_user, parsed, prior_result)
                summary = [{"type": "summary_text", "text": f"**{summary_title(parsed)}**\n\n{text}"}]
            else:
                summary = []
            items.append({"type": "reasoning", "id": hex_id("rs_", seed), "summary": summary,
                          "encrypted_content": encrypted_content(seed)})
            reasoning_count += 1
            if r["content"]:
                items.append({"type": "message", "role": "assistant", "id": hex_id("msg_", seed),
                              "status": "completed",
                              "content": [{"type": "output_text", "text": r["content"], "annotations": []}]})
            for k, tc in enumerate(calls):
                items.append({"type": "function_call", "call_id": tc["id"], "name": tc["name"],
                              "arguments": tc["arguments"], "id": hex_id("fc_", f"{seed}:{k}"),
                              "status": "completed"})
    # pairing check
    calls_seen = [it["call_id"] for it in items if it.get("type") == "function_call"]
    outs_seen = [it["call_id"] for it in items if it.get("type") == "function_call_output"]
    assert sorted(calls_seen) == sorted(outs_seen) and len(set(calls_seen)) == len(calls_seen)
    for it_i, it in enumerate(items):
        if it.get("type") == "function_call_output":
            assert it["call_id"] in [x.get("call_id") for x in items[:it_i] if x.get("type") == "function_call"]

    used = calls_by_name(rows)
    tools = [{"type": "function", "name": name, "description": TAU_TOOLS.get(name, f"The {name} tool."),
              "parameters": object_schema(used[name]), "strict": False} for name in sorted(used)]
    source = (
        f"{TAU_ATTRIBUTION}. All {len(rows)} corpus rows kept, in order; call ids as in the corpus "
        f"(ids ending __dupN were renamed by the corpus because tau-bench reused them). "
        f"Synthesised: one reasoning item before every assistant output ({reasoning_count}; "
        f"summary text derived from the last user text, last result and the calls, empty summary "
        f"for turns without calls; encrypted_content is Fernet-shaped base64 of SHA-256 material, "
        f"not a real token), the rs_/msg_/fc_ item ids, and the tool definitions (descriptions "
        f"written here, parameters inferred from the recorded arguments). Unanswered calls "
        f"dropped: {dropped_calls or 'none'}; orphan outputs dropped: {dropped_results or 'none'}."
    )
    return {"name": "agents_sdk_responses", "format": "openai_responses", "source": source,
            "tools": tools, "messages": items}


# ---------------------------------------------------------------------------------------------
# 3. synthesised computer-use session with real PNG screenshots

W, H = 1280, 800


def png_bytes(rows):
    """A truecolour 8-bit PNG from a list of H row byte strings (W*3 bytes each)."""
    raw = b"".join(b"\x00" + row for row in rows)

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", W, H, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


def render(rects, bg):
    """rects: (x0, y0, x1, y1, (r, g, b)) painted in order over a bg colour."""
    rows = []
    cache = {}
    for y in range(H):
        active = tuple(r for r in rects if r[1] <= y < r[3])
        row = cache.get(active)
        if row is None:
            buf = bytearray(bytes(bg) * W)
            for x0, _, x1, _, c in active:
                x0, x1 = max(0, x0), min(W, x1)
                if x1 > x0:
                    buf[x0 * 3:x1 * 3] = bytes(c) * (x1 - x0)
            row = cache[active] = bytes(buf)
        rows.append(row)
    return png_bytes(rows)


def screen(step, state):
    """A simple desktop: title bar, sidebar, content cards, a toggle and the mouse pointer."""
    dark = state["dark"]
    bg = (32, 33, 36) if dark else (246, 247, 249)
    fg = (60, 64, 67) if dark else (218, 220, 224)
    accent = state["accent"]
    rects = [
        (0, 0, W, 36, (20, 20, 22) if dark else (222, 225, 230)),          # title bar
        (12, 10, 28, 26, (237, 106, 94)), (36, 10, 52, 26, (245, 191, 79)), (60, 10, 76, 26, (97, 195, 84)),
        (200, 8, 1080, 28, (48, 49, 52) if dark else (255, 255, 255)),     # address bar
        (0, 36, 240, H, (41, 42, 45) if dark else (236, 238, 241)),        # sidebar
    ]
    for k in range(8):                                                      # sidebar entries
        y = 64 + k * 44
        colour = accent if k == state["nav"] else fg
        rects.append((20, y, 220, y + 28, colour))
    page = state["page"]
    if page == "home":
        for k in range(3):
            rects.append((280 + k * 320, 80, 560 + k * 320, 300, fg))
        rects.append((280, 340, 1200, 700, fg))
    elif page == "settings":
        rects.append((280, 72, 640, 104, fg))                               # heading
        for k in range(6):                                                  # setting rows
            y = 140 + k * 84
            rects.append((280, y, 1200, y + 64, (48, 49, 52) if dark else (255, 255, 255)))
            rects.append((300, y + 20, 600, y + 44, fg))
        on = state["dark"]
        rects.append((1100, 260, 1172, 292, accent if on else (189, 193, 198)))  # dark mode toggle
        rects.append((1144 if on else 1104, 264, 1168 if on else 1128, 288, (255, 255, 255)))
        if state.get("picker"):
            rects.append((860, 440, 1180, 640, (60, 64, 67) if dark else (250, 250, 250)))
            for k, c in enumerate(((26, 115, 232), (217, 48, 37), (30, 142, 62), (161, 66, 244))):
                rects.append((880 + k * 72, 470, 932 + k * 72, 522, c))
            rects.append((880, 560, 1160, 600, (48, 49, 52) if dark else (255, 255, 255)))
    if state.get("typed"):
        n = min(len(state["typed"]), 60)
        rects.append((210, 12, 210 + n * 9, 24, (154, 160, 166)))
    # a thin progress stripe so that every screenshot differs, and the pointer
    rects.append((0, H - 4, 40 + step * 60, H, accent))
    mx, my = state["mouse"]
    rects.append((mx, my, mx + 3, my + 18, (0, 0, 0) if not dark else (255, 255, 255)))
    rects.append((mx, my, mx + 12, my + 3, (0, 0, 0) if not dark else (255, 255, 255)))
    return render(rects, bg)


COMPUTER_SYSTEM = (
    "You are operating a Linux desktop through the `computer` tool; the screen is 1280x800. "
    "Take a screenshot before acting when you are unsure of the screen's state, and verify the "
    "result of each action. The browser is already open."
)

# Each step: (thinking or None, assistant text or None, input, state changes, result text or None,
# with_image). State changes are applied before the screenshot of the result is rendered.
COMPUTER_TURNS = [
    {"user": [{"type": "text", "text": "Open the settings page of the web app at http://localhost:8080 and enable dark mode."}],
     "steps": [
         ("The user wants dark mode enabled in the web app's settings. I should look at the screen first to see what's open.",
          "I'll start by taking a screenshot to see the current state of the screen.",
          {"action": "screenshot"}, {}, None, True),
         (None, None, {"action": "left_click", "coordinate": [640, 18]}, {"mouse": (640, 18)}, None, True),
         ("The address bar is focused now; typing the URL and pressing Enter should load the app.", None,
          {"action": "type", "text": "http://localhost:8080"}, {"typed": "http://localhost:8080"}, None, False),
         (None, None, {"action": "key", "text": "Return"}, {"page": "home", "nav": 0}, None, True),
         ("The app's home page is loaded. The sidebar has eight entries; settings is usually the last one, at about y=372.",
          "The app is loaded. I'll open Settings from the sidebar.",
          {"action": "left_click", "coordinate": [120, 372]}, {"mouse": (120, 372), "page": "settings", "nav": 7}, None, True),
         (None, None, {"action": "mouse_move", "coordinate": [700, 420]}, {"mouse": (700, 420)}, "Moved the mouse to (700, 420).", False),
         ("I'm on the settings page. The second row should be Appearance → Dark mode, with a toggle on the right at about (1136, 276). Let me zoom in with a fresh screenshot before clicking.", None,
          {"action": "screenshot"}, {}, None, True),
         (None, "I can see the Dark mode toggle. Turning it on now.",
          {"action": "left_click", "coordinate": [1136, 276]}, {"mouse": (1136, 276), "dark": True}, None, True),
         (None, None, {"action": "wait", "duration": 1}, {}, "Waited 1 second.", True),
         ("The background is dark and the toggle sits to the right in the accent colour, so dark mode is on. One last full screenshot to confirm nothing else changed.", None,
          {"action": "screenshot"}, {"mouse": (900, 700)}, None, True),
     ],
     "final": "Dark mode is now enabled: the Settings → Appearance toggle is on and the whole app switched to the dark theme."},
    {"user": [{"type": "text", "text": "Great. Now make the accent colour match this mockup, please."},
              {"type": "image", "source": {"type": "url", "url": "https://example.com/mockup.png"}}],
     "steps": [
         ("The mockup uses a purple accent. The accent colour setting should be further down the settings page; I'll scroll.",
          "The mockup uses a purple accent. Let me find the accent colour setting.",
          {"action": "scroll", "coordinate": [740, 500], "scroll_direction": "down", "scroll_amount": 3}, {"mouse": (740, 500)}, None, True),
         (None, None, {"action": "left_click", "coordinate": [1020, 480]}, {"mouse": (1020, 480), "picker": True}, None, True),
         ("The colour picker is open with four swatches: blue, red, green and purple. Purple is the fourth, centred near (1122, 496).", None,
          {"action": "left_click", "coordinate": [1122, 496]}, {"mouse": (1122, 496), "accent": (161, 66, 244)}, None, True),
         (None, None, {"action": "triple_click", "coordinate": [1020, 580]}, {"mouse": (1020, 580)}, None, True),
         (None, "I'll also set the exact hex value from the mockup.",
          {"action": "type", "text": "#A142F4"}, {}, None, False),
         (None, None, {"action": "key", "text": "Return"}, {"picker": False}, None, True),
         ("The picker closed and the sidebar highlight and toggle are now purple. Taking a final screenshot to compare against the mockup.", None,
          {"action": "screenshot"}, {"mouse": (640, 760)}, None, True),
     ],
     "final": "Done: the accent colour is now purple (#A142F4), matching the mockup, and dark mode is still on."},
]


def build_computer():
    state = {"dark": False, "accent": (26, 115, 232), "nav": -1, "page": "blank", "mouse": (640, 400), "typed": None}
    messages = []
    tool_turn = 0
    shots = 0
    sizes = []
    step_no = 0
    for t_i, turn in enumerate(COMPUTER_TURNS):
        pending_user = list(turn["user"])
        for thinking, text, action, changes, result_text, with_image in turn["steps"]:
            if pending_user:
                messages.append({"role": "user", "content": pending_user})
            seed = f"computer_use_screenshots:{t_i}:{step_no}"
            content = []
            if thinking:
                content.append({"type": "thinking", "thinking": thinking, "signature": thinking_signature(seed)})
            if text:
                content.append({"type": "text", "text": text})
            tid = toolu_id(seed)
            content.append({"type": "tool_use", "id": tid, "name": "computer", "input": action})
            messages.append({"role": "assistant", "content": content})
            tool_turn += 1
            state.update(changes)
            if changes.get("page") == "home" or action["action"] == "key":
                state["typed"] = None if action["action"] == "key" else state["typed"]
            result = {"type": "tool_result", "tool_use_id": tid}
            if with_image:
                png = screen(step_no, state)
                sizes.append(len(png))
                shots += 1
                blocks = []
                if result_text:
                    blocks.append({"type": "text", "text": result_text})
                blocks.append({"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                           "data": base64.b64encode(png).decode("ascii")}})
                result["content"] = blocks
            else:
                result["content"] = result_text or ""
            pending_user = [result]
            step_no += 1
        messages.append({"role": "user", "content": pending_user})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": turn["final"]}]})
    # end on a user message, as a request does
    messages.append({"role": "user", "content": [{"type": "text", "text": "Thanks, that's all."}]})
    check_anthropic(messages)
    source = (
        "Synthesised by scripts/make-turn-fixtures.py (no corpus material): a two-task computer-use "
        f"session with {tool_turn} computer tool calls; {shots} tool results carry a real 1280x800 "
        f"RGB PNG (simple flat-colour UI mock-ups, each different, {min(sizes)}-{max(sizes)} bytes) "
        "and one user message an image by URL; thinking signatures are base64 of SHA-256 "
        "material, not real signatures. The computer_20250124 tool is a beta tool in the "
        "Anthropic SDK (anthropic-beta: computer-use-2025-01-24)."
    )
    return {"name": "computer_use_screenshots", "format": "anthropic", "source": source,
            "system": COMPUTER_SYSTEM,
            "tools": [{"type": "computer_20250124", "name": "computer", "display_width_px": W, "display_height_px": H}],
            "messages": messages}



# ---------------------------------------------------------------------------------------------
# A Codex-CLI-like session: a developer message, shell function calls and freeform
# `apply_patch` custom tool calls (the input is the patch text, not JSON).

CODEX_DEVELOPER = (
    "<permissions instructions>\nFilesystem sandboxing defines which files can be read or written. "
    "The sandbox is workspace-write: the workspace and /tmp may be written; everything else is read-only. "
    "Network access is restricted. Approval policy: on-request.\n</permissions instructions>\n"
    + "".join(
        f"Rule {i}: keep changes minimal, run the tests that cover what you changed, and report what you ran.\n"
        for i in range(1, 25)
    )
)

CODEX_FILES = {
    "src/routes/employees.ts": "import { Router } from 'express';\n" + "".join(
        f"router.get('/employees/{i}', (req, res) => res.json(listEmployees({i})));\n" for i in range(40)),
    "src/pages/EmployerDashboard.tsx": "export function EmployerDashboard() {\n" + "".join(
        f"  const section{i} = useSection('card-{i}');\n" for i in range(45)) + "}\n",
    "tests/employees.test.ts": "import { listEmployees } from '../src/routes/employees';\n" + "".join(
        f"test('lists page {i}', () => expect(listEmployees({i})).toHaveLength(10));\n" for i in range(35)),
}

CODEX_TASKS = [
    ("Remove the separate /employer/employees page and show the employee list on the dashboard.",
     [("src/routes/employees.ts", "drop the standalone route"),
      ("src/pages/EmployerDashboard.tsx", "render the employee list as a card")],
     "The dashboard now shows the employee list; the standalone route is gone and its tests pass."),
    ("Now make the list paginate ten at a time and keep the tests green.",
     [("src/pages/EmployerDashboard.tsx", "paginate the employee card"),
      ("tests/employees.test.ts", "cover the second page")],
     "The employee card pages ten at a time; `npm test` passes (36 tests)."),
]


def codex_patch(path, what, seed):
    lines = [f"*** Begin Patch", f"*** Update File: {path}", f"@@ {what}"]
    for k in range(det_int(seed, 18, 30)):
        lines.append(f"-  const old{k} = legacy('{path}', {k});")
        lines.append(f"+  const item{k} = current('{path}', {k}); // {what}")
    lines.append("*** End Patch")
    return "\n".join(lines) + "\n"


def build_codex():
    messages = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": CODEX_DEVELOPER}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text",
            "text": "<environment_context>\n  <cwd>/workspace/dashboard</cwd>\n  <shell>bash</shell>\n</environment_context>"}]},
    ]
    calls = 0
    for t, (request, edits, final) in enumerate(CODEX_TASKS):
        messages.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": request}]})
        for step, (path, what) in enumerate(edits):
            seed = f"codex_custom_tools:{t}:{step}"
            messages.append({"type": "reasoning", "id": hex_id("rs_", seed), "summary": [],
                             "encrypted_content": encrypted_content(seed)})
            read_id = "call_" + hex_id("", seed + ":read", 24)
            messages.append({"type": "function_call", "id": hex_id("fc_", seed), "call_id": read_id, "name": "shell",
                             "arguments": json.dumps({"command": ["bash", "-lc", f"sed -n 1,200p {path}"], "workdir": "/workspace/dashboard"})})
            messages.append({"type": "function_call_output", "call_id": read_id,
                             "output": json.dumps({"output": CODEX_FILES[path], "metadata": {"exit_code": 0, "duration_seconds": 0.1}})})
            patch_id = "call_" + hex_id("", seed + ":patch", 24)
            messages.append({"type": "custom_tool_call", "id": hex_id("ctc_", seed), "call_id": patch_id,
                             "name": "apply_patch", "input": codex_patch(path, what, seed)})
            messages.append({"type": "custom_tool_call_output", "call_id": patch_id,
                             "output": f"Success. Updated the following files:\nM {path}\n"})
            calls += 2
        seed = f"codex_custom_tools:{t}:test"
        test_id = "call_" + hex_id("", seed, 24)
        messages.append({"type": "function_call", "id": hex_id("fc_", seed), "call_id": test_id, "name": "shell",
                         "arguments": json.dumps({"command": ["bash", "-lc", "npm test"], "workdir": "/workspace/dashboard"})})
        messages.append({"type": "function_call_output", "call_id": test_id,
                         "output": json.dumps({"output": "".join(f"PASS tests/employees.test.ts > lists page {i}\n" for i in range(36)),
                                               "metadata": {"exit_code": 0, "duration_seconds": 2.4}})})
        calls += 1
        messages.append({"type": "message", "role": "assistant", "id": hex_id("msg_", seed), "status": "completed",
                         "content": [{"type": "output_text", "text": final, "annotations": []}]})
    messages.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Thanks. Commit it."}]})
    source = (
        "Synthesised by scripts/make-turn-fixtures.py (no corpus material), in the shape of a Codex CLI "
        f"session's Responses input: a developer message, two tasks, {calls} calls: `shell` function calls "
        "(arguments as JSON text) and freeform `apply_patch` custom tool calls (input: the patch text), "
        "reasoning items with Fernet-shaped encrypted_content of SHA-256 material (not real tokens)."
    )
    tools = [
        {"type": "function", "name": "shell", "description": "Runs a shell command and returns its output.",
         "parameters": {"type": "object", "properties": {"command": {"type": "array", "items": {"type": "string"}},
                                                          "workdir": {"type": "string"}},
                        "required": ["command"]}, "strict": False},
        {"type": "custom", "name": "apply_patch",
         "description": "Applies a patch in the apply_patch format: *** Begin Patch ... *** End Patch.",
         "format": {"type": "grammar", "syntax": "lark",
                    "definition": "start: begin_patch hunk+ end_patch\nbegin_patch: \"*** Begin Patch\" LF\nend_patch: \"*** End Patch\" LF?\nhunk: /(.|\\n)+?/\n%import common.LF"}},
    ]
    return {"name": "codex_custom_tools", "format": "openai_responses", "source": source,
            "tools": tools, "messages": messages}

# ---------------------------------------------------------------------------------------------
# An agent on OpenAI's built-in `shell` and `apply_patch` tools (Responses `shell_call` and
# `apply_patch_call` items, answered by `shell_call_output` and `apply_patch_call_output`).


def build_shell_tools():
    messages = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": CODEX_DEVELOPER}]},
    ]
    calls = 0
    for t, (request, edits, final) in enumerate(CODEX_TASKS):
        messages.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": request}]})
        for step, (path, what) in enumerate(edits):
            seed = f"shell_tools:{t}:{step}"
            messages.append({"type": "reasoning", "id": hex_id("rs_", seed), "summary": [],
                             "encrypted_content": encrypted_content(seed)})
            read_id = "call_" + hex_id("", seed + ":read", 24)
            messages.append({"type": "shell_call", "id": hex_id("sh_", seed), "call_id": read_id, "status": "completed",
                             "action": {"commands": [f"sed -n 1,200p {path}"], "timeout_ms": 120000,
                                        "max_output_length": 12000}})
            messages.append({"type": "shell_call_output", "call_id": read_id, "max_output_length": 12000,
                             "output": [{"stdout": CODEX_FILES[path], "stderr": "",
                                         "outcome": {"type": "exit", "exit_code": 0}}]})
            patch_id = "call_" + hex_id("", seed + ":patch", 24)
            diff = "\n".join(codex_patch(path, what, seed).splitlines()[2:-1]) + "\n"
            messages.append({"type": "apply_patch_call", "id": hex_id("apc_", seed), "call_id": patch_id,
                             "status": "completed", "operation": {"type": "update_file", "path": path, "diff": diff}})
            messages.append({"type": "apply_patch_call_output", "call_id": patch_id, "status": "completed",
                             "output": f"Updated {path}"})
            calls += 2
        for attempt, code in enumerate((1, 0)):
            seed = f"shell_tools:{t}:test:{attempt}"
            test_id = "call_" + hex_id("", seed, 24)
            messages.append({"type": "shell_call", "id": hex_id("sh_", seed), "call_id": test_id, "status": "completed",
                             "action": {"commands": ["npm test"], "timeout_ms": 600000}})
            stdout = "".join(f"PASS tests/employees.test.ts > lists page {i}\n" for i in range(36 - 2 * code))
            stderr = (f"FAIL tests/employees.test.ts > lists page 35\nTypeError: listEmployees is not a function "
                      f"(src/routes/employees.ts:{12 + t})\n") if code else ""
            messages.append({"type": "shell_call_output", "call_id": test_id,
                             "output": [{"stdout": stdout, "stderr": stderr,
                                         "outcome": {"type": "exit", "exit_code": code}}]})
            calls += 1
        messages.append({"type": "message", "role": "assistant", "id": hex_id("msg_", f"shell_tools:{t}"),
                         "status": "completed", "content": [{"type": "output_text", "text": final, "annotations": []}]})
    messages.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Thanks. Commit it."}]})
    source = (
        "Synthesised by scripts/make-turn-fixtures.py (no corpus material), in the shape of a Responses "
        f"input of an agent on OpenAI's built-in shell and apply_patch tools: a developer message, two tasks, "
        f"{calls} calls: `shell_call` items (the action's commands) answered by `shell_call_output` "
        "(stdout, stderr, outcome; one failing test run a task), `apply_patch_call` items (an update_file "
        "operation with its diff) answered by `apply_patch_call_output`, reasoning items with Fernet-shaped "
        "encrypted_content of SHA-256 material (not real tokens)."
    )
    tools = [{"type": "shell"}, {"type": "apply_patch"}]
    return {"name": "shell_and_apply_patch", "format": "openai_responses", "source": source,
            "tools": tools, "messages": messages}

# ---------------------------------------------------------------------------------------------


def write(fixture):
    path = os.path.join(OUT_DIR, fixture["name"] + ".json")
    text = json.dumps(fixture, ensure_ascii=False, indent=1) + "\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(path, REPO_ROOT)}: {len(text.encode('utf-8'))} bytes, "
          f"{len(fixture['messages'])} messages/items, {len(fixture['tools'])} tools")


def main(argv):
    corpus = os.path.abspath(argv[1]) if len(argv) > 1 else os.path.normpath(DEFAULT_CORPUS)
    for name in (CLAUDE_SESSION, TAU_SESSION):
        if not os.path.exists(os.path.join(corpus, name)):
            sys.exit(f"corpus file missing: {os.path.join(corpus, name)}")
    os.makedirs(OUT_DIR, exist_ok=True)
    write(build_claude(corpus))
    write(build_tau(corpus))
    write(build_computer())
    write(build_codex())
    write(build_shell_tools())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
