// memoryd's opencode shim. memoryd writes this file; the daemon does all the work out of process.
// Per model request: one stat of the rendered memory block (re-read only when it changed), pushed
// as the 2nd system message. Per reply that cites memory: strip the citation block and append
// one JSON line to the spool. At load: record this server's address. Node builtins only.
import fs from "node:fs";
import path from "node:path";

const BLOCK_FILE = {{ block_file }};
const SPOOL_FILE = {{ spool_file }};
const SERVER_FILE = {{ server_file }};
const HELPER_AGENT_PREFIX = {{ helper_agent_prefix }};
const MEMORYD_VERSION = {{ memoryd_version }};

// opencode's hidden title call reuses the user's session id; its system prompt gives it away.
const TITLE_PROMPT = "You are a title generator.";
const MAX_HELPERS = 1000;

// ---- <memory-citation> parsing: a line-for-line port of memoryd/citations.py ----------------
// Python's re.I also folds ı/İ into i and ſ into s, so the tags are spelled out case by case.
const ci = (w) => w.replace(/[a-z]/g, (c) =>
  c === "i" ? "[iIıİ]" : c === "s" ? "[sSſ]" : `[${c}${c.toUpperCase()}]`);
const TAG = ci("memory-citation");
const BLOCK = new RegExp(`<${TAG}>([\\s\\S]*?)</${TAG}>`, "gu");
const UNCLOSED = new RegExp(`<${TAG}>(?:(?!</${TAG}>)[\\s\\S])*$`, "gu");
const WORD = "[\\p{L}\\p{N}_]"; // Python's Unicode \w, for its \b
const SESSION_ID = new RegExp(`(?<!${WORD})ses_[A-Za-z0-9]{6,}(?!${WORD})`, "gu");
const PY_SPACE = "[\\t-\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";
const STRIP = new RegExp(`^${PY_SPACE}+|${PY_SPACE}+$`, "gu");
const RSTRIP = new RegExp(`${PY_SPACE}+$`, "u");
const LINES = /\r\n|[\n\v\f\r\x1c-\x1e\x85\u2028\u2029]/u; // str.splitlines()
// int(): outer Unicode spaces (but not \x1c-\x1f), a sign, decimal digits with single underscores.
const INT_SPACE = "[\\t-\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]*";
const INT = new RegExp(`^${INT_SPACE}([+-]?)(\\p{Nd}+(?:_\\p{Nd}+)*)${INT_SPACE}$`, "u");

const pyStrip = (s) => s.replace(STRIP, "");

function pyInt(s) {
  const m = INT.exec(s);
  if (!m) return null;
  let n = 0;
  for (const ch of m[2]) {
    if (ch === "_") continue;
    let zero = ch.codePointAt(0); // Unicode decimal digits come in runs of ten, 0 to 9
    while (/\p{Nd}/u.test(String.fromCodePoint(zero - 1))) zero--;
    n = n * 10 + ((ch.codePointAt(0) - zero) % 10);
  }
  return m[1] === "-" ? -n : n;
}

function section(body, name) {
  const m = new RegExp(`<${ci(name)}>([\\s\\S]*?)</${ci(name)}>`, "u").exec(body);
  return m ? m[1] : null;
}

function entry(line) {
  const cut = line.lastIndexOf("|note=[");
  if (cut < 0 || !line.endsWith("]", line.length) || line.length - cut - 7 < 1) return null;
  const head = line.slice(0, cut), note = line.slice(cut + 7);
  const colon = head.lastIndexOf(":");
  if (colon < 0 || !pyStrip(head.slice(0, colon))) return null;
  const rng = head.slice(colon + 1), dash = rng.indexOf("-");
  const start = pyInt(dash < 0 ? rng : rng.slice(0, dash));
  const end = dash < 0 || dash === rng.length - 1 ? start : pyInt(rng.slice(dash + 1));
  if (start === null || end === null) return null;
  return { path: pyStrip(head.slice(0, colon)), line_start: start, line_end: end, note: pyStrip(note.slice(0, -1)) };
}

export function parseCitations(text) {
  const ids = [], entries = [], seen = new Set();
  const add = (sid) => { if (!seen.has(sid)) { seen.add(sid); ids.push(sid); } };
  for (const [, block] of text.matchAll(BLOCK)) {
    for (const raw of (section(block, "citation_entries") ?? "").split(LINES)) {
      const line = pyStrip(raw);
      if (!line) continue;
      const e = entry(line);
      if (e) entries.push(e);
      else if (!line.includes("|note=")) for (const [sid] of line.matchAll(SESSION_ID)) add(sid); // legacy
    }
    for (const [sid] of (section(block, "session_ids") ?? "").matchAll(SESSION_ID)) add(sid);
  }
  return { ids, entries };
}

export function stripCitations(text) {
  if (!text.toLowerCase().includes("<memory-citation")) return text;
  const out = text.replace(BLOCK, "").replace(UNCLOSED, "").replace(/\n{3,}/g, "\n\n");
  return out.replace(RSTRIP, "");
}
