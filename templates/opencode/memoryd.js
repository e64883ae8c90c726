// memoryd's opencode shim. memoryd writes this file; the daemon does all the work out of process.
// Per model request: one stat of the rendered memory block of this instance's project (re-read
// only when it changed), pushed as the 2nd system message. Per reply that cites memory: strip the
// citation block and append one JSON line to the spool. At load: record this server's address,
// work out the project key of the instance folder (same rule as memoryd/scopes.py), announce it so
// memoryd renders that project's block, and keep the global-only block as the fallback until it
// does. Tools: memoryd's three memory tools, each call answered by one short-lived `memoryd tool`
// process told this project's key and this server's address (where it reads a note's session to
// see whether the user asked for it); nothing stays up per instance. Node builtins only.
import { execFile } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";

const BLOCK_FILE = {{ block_file }};
const PROJECTS_DIR = {{ projects_dir }};
const SEEN_DIR = {{ seen_dir }};
const SPOOL_FILE = {{ spool_file }};
const SERVER_FILE = {{ server_file }};
const HELPER_AGENT_PREFIX = {{ helper_agent_prefix }};
const MEMORYD_VERSION = {{ memoryd_version }};
const TOOL_COMMAND = {{ tool_command }}; // argv that answers one tool call: + name, args JSON
const TOOL_ENV = {{ tool_env }};
const TOOLS = {{ tool_specs }}; // name -> { description, args: JSON schema per argument }
const TOOL_TIMEOUT_MS = 60000;

// opencode's hidden title call reuses the user's session id; its system prompt gives it away.
const TITLE_PROMPT = "You are a title generator.";
const MAX_HELPERS = 1000;

// ---- <memory-citation> parsing: a line-for-line port of memoryd/read/citations.py ----------------
// Python's re.I also matches dotless i, dotted capital I and long s, so tags are spelled out.
const ci = (w) => w.replace(/[a-z]/g, (c) =>
  c === "i" ? "[iI\\u0131\\u0130]" : c === "s" ? "[sS\\u017f]" : `[${c}${c.toUpperCase()}]`);
const TAG = ci("memory-citation");
const BLOCK = new RegExp(`<${TAG}>([\\s\\S]*?)</${TAG}>`, "gu");
const UNCLOSED = new RegExp(`<${TAG}>(?:(?!</${TAG}>)[\\s\\S])*$`, "gu");
const SESSION_ID = /(?<![\p{L}\p{N}_])(?:ses_[A-Za-z0-9]{6,}|(?:claude-code|codex):[0-9A-Fa-f][0-9A-Fa-f-]{6,}[0-9A-Fa-f])(?![\p{L}\p{N}_])/gu; // \b as in Python
const SPACE = /^[\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]$/; // str.isspace()
const LINES = /\r\n|[\n\v\f\r\x1c-\x1e\x85\u2028\u2029]/u; // str.splitlines()
const SECTION = (name) => new RegExp(`<${ci(name)}>([\\s\\S]*?)</${ci(name)}>`, "u");
const ENTRIES = SECTION("citation_entries"), IDS = SECTION("session_ids");
// int(): outer Unicode spaces (not \x1c-\x1f), a sign, decimal digits joined by single underscores.
const INT_SPACE = "[\\t-\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]*";
const INT = new RegExp(`^${INT_SPACE}([+-]?)(\\p{Nd}+(?:_\\p{Nd}+)*)${INT_SPACE}$`, "u");

function pyStrip(s, left = true) { // a loop: a regex anchored at $ goes quadratic on long space runs
  let a = 0, b = s.length;
  while (b > a && SPACE.test(s[b - 1])) b--;
  while (left && a < b && SPACE.test(s[a])) a++;
  return s.slice(a, b);
}

function pyInt(s) {
  const m = INT.exec(s);
  if (!m) return null;
  let n = 0;
  for (const ch of m[2].replaceAll("_", "")) {
    let zero = ch.codePointAt(0); // Unicode decimal digits come in runs of ten, 0 to 9
    while (/\p{Nd}/u.test(String.fromCodePoint(zero - 1))) zero--;
    n = n * 10 + ((ch.codePointAt(0) - zero) % 10);
  }
  return m[1] === "-" ? -n : n;
}

function entryLine(line) { // "path:a-b,c-d|note=[...]" gives one entry per range
  const cut = line.lastIndexOf("|note=[");
  const note = line.slice(cut + 7);
  if (cut < 0 || !note.endsWith("]")) return null;
  const head = line.slice(0, cut), colon = head.lastIndexOf(":");
  const file = pyStrip(head.slice(0, colon));
  if (colon < 0 || !file) return null;
  const out = [];
  for (const rng of head.slice(colon + 1).split(",")) {
    const dash = rng.indexOf("-");
    const start = pyInt(dash < 0 ? rng : rng.slice(0, dash));
    const end = dash < 0 || dash === rng.length - 1 ? start : pyInt(rng.slice(dash + 1));
    if (start === null || end === null) return null;
    out.push({ path: file, line_start: start, line_end: end, note: pyStrip(note.slice(0, -1)) });
  }
  return out;
}

function parseCitations(text) {
  const ids = [], entries = [], seen = new Set();
  const add = (sid) => { if (!seen.has(sid)) { seen.add(sid); ids.push(sid); } };
  for (const [, block] of text.matchAll(BLOCK)) {
    for (const raw of (ENTRIES.exec(block)?.[1] ?? "").split(LINES)) {
      const line = pyStrip(raw);
      if (!line) continue;
      const e = entryLine(line);
      if (e) entries.push(...e);
      else if (!line.includes("|note=")) for (const [sid] of line.matchAll(SESSION_ID)) add(sid); // legacy
    }
    for (const [sid] of (IDS.exec(block)?.[1] ?? "").matchAll(SESSION_ID)) add(sid);
  }
  return { ids, entries };
}

function stripCitations(text) {
  if (!text.toLowerCase().includes("<memory-citation")) return text;
  return pyStrip(text.replace(BLOCK, "").replace(UNCLOSED, "").replace(/\n{3,}/g, "\n\n"), false);
}

// ---- project scope: a port of memoryd/scopes.py (scope_root, scope_key) ----------------------------
function scopeRoot(ctx) {
  const wt = ctx?.worktree, dir = ctx?.directory;
  if (typeof wt === "string" && wt && wt !== "/") return wt;
  if (wt === "/" && typeof dir === "string" && dir) return dir; // a loose folder is its own scope
  return null;
}

function scopeKey(root) {
  const digest = crypto.createHash("sha256").update(root, "utf8").digest("hex").slice(0, 8);
  const base = root.replace(/\/+$/, "").split("/").pop();
  let name = "";
  for (const ch of base) name += /^[A-Za-z0-9]$/.test(ch) ? ch.toLowerCase() : "-";
  name = name.replace(/-+/g, "-").replace(/^-+|-+$/g, "").slice(0, 32).replace(/-+$/, "");
  return name ? `${name}-${digest}` : digest;
}

// ---- the memory tools ------------------------------------------------------------------------
function runTool(name, args, ctx, projectKey, serverUrl) {
  return new Promise((resolve, reject) => {
    const argv = [...TOOL_COMMAND.slice(1), name, JSON.stringify(args ?? {})];
    if (typeof ctx?.sessionID === "string") argv.push("--session", ctx.sessionID);
    if (projectKey) argv.push("--project", projectKey); // the call sees this project + global only
    if (serverUrl) argv.push("--server", serverUrl); // credentials: this process's environment
    const child = execFile(TOOL_COMMAND[0], argv,
      { env: { ...process.env, ...TOOL_ENV }, timeout: TOOL_TIMEOUT_MS, maxBuffer: 8 << 20, windowsHide: true },
      (err, stdout, stderr) => {
        ctx?.abort?.removeEventListener?.("abort", stop);
        if (!err) return resolve(String(stdout));
        const why = String(stderr ?? "").trim().replace(/^memoryd: /, "");
        reject(new Error(why || `${TOOL_COMMAND[0]} (memoryd tool ${name}) failed: ${err.message}`));
      });
    const stop = () => child.kill();
    ctx?.abort?.addEventListener?.("abort", stop, { once: true });
  });
}

// projectKey: the instance's project (one server can hold instances of several projects)
const memoryTools = (projectKey, serverUrl) => Object.fromEntries(Object.entries(TOOLS).map(([name, spec]) => [name,
  { description: spec.description, args: spec.args, execute: (args, ctx) => runTool(name, args, ctx, projectKey, serverUrl) }]));

// ---- the plugin ------------------------------------------------------------------------------
export const MemorydShim = async (ctx) => {
  const helpers = new Set(); // sessions whose last turn ran a memoryd- agent, oldest first
  let titlePrompt = TITLE_PROMPT;
  let cache = null; // { mtimeMs, size, ino, text } of blockFile
  let blockFile = BLOCK_FILE, fallback = ""; // fallback: the global-only block as it was at load
  let projectKey = null;

  try { // Which project this instance serves: its block file is the only one stat'ed per request.
    const root = scopeRoot(ctx);
    if (root) {
      const key = scopeKey(root);
      projectKey = key;
      blockFile = path.join(PROJECTS_DIR, `${key}.md`);
      const seen = path.join(SEEN_DIR, key);
      if (!fs.existsSync(seen)) { // tell memoryd: render this project's block from now on
        fs.mkdirSync(SEEN_DIR, { recursive: true, mode: 0o700 });
        fs.writeFileSync(seen, root + "\n", { mode: 0o600 });
      }
      if (!fs.existsSync(blockFile)) fallback = fs.readFileSync(BLOCK_FILE, "utf8");
    }
  } catch {}

  let serverUrl = "";
  try { serverUrl = String(ctx?.serverUrl ?? ""); } catch {}
  if (!/^https?:\/\//.test(serverUrl)) serverUrl = "";

  try { // Record where this server is; never call it from here (it is still booting: defect 1).
    const env = process.env, tmp = `${SERVER_FILE}.${process.pid}.tmp`;
    const info = { url: serverUrl, pid: process.pid,
      username: env.OPENCODE_SERVER_USERNAME || "opencode", password: env.OPENCODE_SERVER_PASSWORD || null,
      version: MEMORYD_VERSION, ts: Date.now() };
    fs.mkdirSync(path.dirname(SERVER_FILE), { recursive: true, mode: 0o700 });
    fs.writeFileSync(tmp, JSON.stringify(info) + "\n", { mode: 0o600 });
    fs.chmodSync(tmp, 0o600); // a stale temp file keeps its old mode otherwise
    fs.renameSync(tmp, SERVER_FILE);
  } catch {}

  return {
    tool: memoryTools(projectKey, serverUrl),
    config: async (cfg) => {
      try { // a user-defined title prompt replaces the built-in one
        const p = cfg?.agent?.title?.prompt;
        if (typeof p === "string" && p.trim()) titlePrompt = p;
      } catch {}
    },
    "chat.message": async (input, output) => {
      try {
        const sid = input?.sessionID ?? output?.message?.sessionID;
        const agent = output?.message?.agent ?? input?.agent;
        if (!sid) return;
        helpers.delete(sid);
        if (typeof agent !== "string" || !agent.startsWith(HELPER_AGENT_PREFIX)) return;
        helpers.add(sid);
        if (helpers.size > MAX_HELPERS) helpers.delete(helpers.values().next().value);
      } catch {}
    },
    "experimental.chat.system.transform": async (input, output) => {
      try {
        const sid = input?.sessionID, system = output?.system;
        if (!sid || helpers.has(sid) || !Array.isArray(system)) return;
        if (typeof system[0] === "string" && system[0].startsWith(titlePrompt)) return;
        const st = fs.statSync(blockFile, { throwIfNoEntry: false });
        if (!st) { // memoryd has not rendered this project's block yet: the global one from load time
          cache = null;
          if (fallback.trim()) system.push(fallback);
          return;
        }
        if (!cache || cache.mtimeMs !== st.mtimeMs || cache.size !== st.size || cache.ino !== st.ino) {
          const text = fs.readFileSync(blockFile, "utf8");
          cache = { mtimeMs: st.mtimeMs, size: st.size, ino: st.ino, text: text.trim() ? text : "" };
        }
        if (cache.text) system.push(cache.text); // push: opencode then sends [its prompt, our block]
      } catch {}
    },
    "experimental.text.complete": async (input, output) => {
      try {
        const text = output?.text;
        if (typeof text !== "string" || !text.toLowerCase().includes("<memory-citation")) return;
        const { ids, entries } = parseCitations(text);
        output.text = stripCitations(text);
        // memoryd's own helpers read transcripts that may quote citations: never count those
        if ((!ids.length && !entries.length) || helpers.has(input?.sessionID)) return;
        const line = JSON.stringify({ v: 1, session_id: input?.sessionID, message_id: input?.messageID,
          part_id: input?.partID, cited: ids, entries, ts: Date.now() });
        fs.mkdirSync(path.dirname(SPOOL_FILE), { recursive: true, mode: 0o700 });
        fs.appendFileSync(SPOOL_FILE, line + "\n", { mode: 0o600 });
      } catch {}
    },
  };
};
