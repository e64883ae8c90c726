// Tests for templates/opencode/memoryd.js, the opencode shim. Run: node --test tests/shim/
// Each test renders the template into a fresh temp dir (placeholders -> JSON literals, strictly,
// like memoryd.prompts.render) and imports it, so module state never leaks between tests.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const TEMPLATE = fs.readFileSync(path.join(ROOT, "templates", "opencode", "memoryd.js"), "utf8");
const GOLDEN = JSON.parse(fs.readFileSync(path.join(ROOT, "tests", "golden", "citations.json"), "utf8"));
const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;
const TITLE_SYSTEM = "You are a title generator. You output ONLY a thread title. Nothing else.\n...";

function render(template, values) {
  const wanted = new Set([...template.matchAll(PLACEHOLDER)].map((m) => m[1]));
  const missing = [...wanted].filter((k) => !(k in values));
  const unknown = Object.keys(values).filter((k) => !wanted.has(k));
  if (missing.length || unknown.length) throw new Error(`missing ${missing} / unknown ${unknown}`);
  return template.replace(PLACEHOLDER, (_, name) => JSON.stringify(values[name]));
}

// Render + import + call the plugin function. Returns the hooks and the paths it was given.
async function load(t, opts = {}) {
  const { env = {} } = opts;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "memoryd-shim-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const values = {
    block_file: path.join(dir, "state", "readpath", "block.md"),
    projects_dir: path.join(dir, "state", "readpath", "projects"),
    seen_dir: path.join(dir, "state", "readpath", "seen"),
    spool_file: path.join(dir, "state", "spool", "citations.jsonl"),
    server_file: path.join(dir, "state", "opencode-server.json"),
    helper_agent_prefix: "memoryd-",
    memoryd_version: "9.9.9-test",
    // a stand-in for `python -m memoryd tool`: echoes what it was given, fails on request
    tool_command: [process.execPath, path.join(dir, "tool.mjs")],
    tool_env: { MEMORYD_HOME: path.join(dir, "home") },
    tool_specs: opts.specs ?? {
      memory_search: { description: "Search memory.", args: { query: { type: "string" } } },
      memory_note: { description: "Save a note.", args: { note: { type: "string" } } },
    },
  };
  fs.writeFileSync(path.join(dir, "tool.mjs"), `
const [name, args, ...rest] = process.argv.slice(2);
if (name === "fail") { process.stderr.write("memoryd: nothing found for that\\n"); process.exit(1); }
if (name === "hang") setTimeout(() => {}, 60000);
else process.stdout.write(JSON.stringify({ name, args: JSON.parse(args), rest, home: process.env.MEMORYD_HOME }));
`);
  const file = path.join(dir, "memoryd.mjs");
  fs.writeFileSync(file, render(TEMPLATE, values));
  const mod = await import(pathToFileURL(file).href);
  const saved = {};
  for (const k of ["OPENCODE_SERVER_USERNAME", "OPENCODE_SERVER_PASSWORD"]) {
    saved[k] = process.env[k];
    if (env[k] === undefined) delete process.env[k];
    else process.env[k] = env[k];
  }
  let hooks;
  try {
    const ctx = "ctx" in opts ? opts.ctx : { serverUrl: new URL("http://127.0.0.1:4321"), directory: dir };
    hooks = await mod.MemorydShim(ctx);
  } finally {
    for (const [k, v] of Object.entries(saved)) (v === undefined ? delete process.env[k] : (process.env[k] = v));
  }
  fs.mkdirSync(path.dirname(values.block_file), { recursive: true });
  const transform = async (sessionID, system = ["provider prompt"]) => {
    const output = { system: [...system] };
    await hooks["experimental.chat.system.transform"]({ sessionID, model: { id: "m" } }, output);
    return output.system;
  };
  const chat = (sessionID, agent) =>
    hooks["chat.message"]({ sessionID, messageID: "msg_1" }, { message: { sessionID, agent }, parts: [] });
  return { dir, values, mod, hooks, transform, chat };
}

// Count calls to every *Sync function of the default node:fs export (the object the shim uses).
function countFs(t) {
  const counts = {};
  for (const name of Object.keys(fs)) {
    const orig = fs[name];
    if (typeof orig !== "function" || !name.endsWith("Sync")) continue;
    fs[name] = function (...args) {
      counts[name] = (counts[name] ?? 0) + 1;
      return orig.apply(this, args);
    };
    t.after(() => (fs[name] = orig));
  }
  return counts;
}

const total = (counts) => Object.values(counts).reduce((a, b) => a + b, 0);

test("the module exports exactly one plugin function (opencode calls every export)", async (t) => {
  const { mod } = await load(t);
  assert.deepEqual(Object.keys(mod), ["MemorydShim"]);
  assert.equal(typeof mod.MemorydShim, "function");
});

test("pushes the block as a new system entry, leaving the first one alone", async (t) => {
  const { values, transform } = await load(t);
  fs.writeFileSync(values.block_file, "## Memory\nfacts\n");
  assert.deepEqual(await transform("ses_user"), ["provider prompt", "## Memory\nfacts\n"]);
});

test("unchanged file: one statSync and no read per call over 10,000 calls", async (t) => {
  const { values, transform } = await load(t);
  const block = "## Memory\n" + "x".repeat(8000) + "\n";
  fs.writeFileSync(values.block_file, block);
  await transform("ses_user"); // prime the cache
  const counts = countFs(t);
  for (let i = 0; i < 10_000; i++) {
    const system = await transform("ses_user");
    if (system.length !== 2 || system[1] !== block) assert.fail(`call ${i} pushed ${system.length - 1} entries`);
  }
  assert.deepEqual(counts, { statSync: 10_000 }); // nothing else: no reads, mkdir, lstat, open
});

test("a changed file is re-read on the next call", async (t) => {
  const { values, transform } = await load(t);
  const f = values.block_file;
  fs.writeFileSync(f, "first version\n");
  assert.equal((await transform("s"))[1], "first version\n");

  fs.writeFileSync(f, "second, longer version\n"); // new size
  assert.equal((await transform("s"))[1], "second, longer version\n");

  const { mtime } = fs.statSync(f);
  fs.writeFileSync(f, "SECOND, LONGER VERSION\n"); // same size, in place ...
  fs.utimesSync(f, mtime, new Date(mtime.getTime() + 5000)); // ... with a bumped mtime
  assert.equal((await transform("s"))[1], "SECOND, LONGER VERSION\n");

  // Atomic replace (temp + rename) with the same size and mtime: the inode gives it away.
  const before = fs.statSync(f);
  fs.writeFileSync(f + ".tmp", "Second, Longer Version\n");
  fs.utimesSync(f + ".tmp", before.atime, before.mtime);
  fs.renameSync(f + ".tmp", f);
  assert.equal((await transform("s"))[1], "Second, Longer Version\n");
});

test("missing file: nothing pushed, no throw; deleted after caching: nothing; back: pushed", async (t) => {
  const { values, transform } = await load(t);
  assert.deepEqual(await transform("s"), ["provider prompt"]);
  fs.writeFileSync(values.block_file, "block\n");
  assert.deepEqual(await transform("s"), ["provider prompt", "block\n"]);
  fs.rmSync(values.block_file);
  assert.deepEqual(await transform("s"), ["provider prompt"]);
  fs.writeFileSync(values.block_file, "block\n");
  assert.deepEqual(await transform("s"), ["provider prompt", "block\n"]);
});

test("a blank block file pushes nothing", async (t) => {
  const { values, transform } = await load(t);
  fs.writeFileSync(values.block_file, " \n\n");
  assert.deepEqual(await transform("s"), ["provider prompt"]);
});

test("no sessionID (opencode's agent generator): nothing pushed, no fs call", async (t) => {
  const { values, transform } = await load(t);
  fs.writeFileSync(values.block_file, "block\n");
  const counts = countFs(t);
  assert.deepEqual(await transform(undefined), ["provider prompt"]);
  assert.deepEqual(await transform(""), ["provider prompt"]);
  assert.equal(total(counts), 0);
});

test("helper sessions learned from chat.message get nothing; a user agent clears the mark", async (t) => {
  const { values, hooks, transform, chat } = await load(t);
  fs.writeFileSync(values.block_file, "block\n");
  await chat("ses_helper", "memoryd-extract");
  await chat("ses_user", "build");
  const counts = countFs(t);
  assert.deepEqual(await transform("ses_helper"), ["provider prompt"]);
  assert.equal(total(counts), 0);
  assert.deepEqual(await transform("ses_user"), ["provider prompt", "block\n"]);
  // input.agent is the fallback when the message carries none
  await hooks["chat.message"]({ sessionID: "ses_h2", agent: "memoryd-consolidate" }, { message: {} });
  assert.deepEqual(await transform("ses_h2"), ["provider prompt"]);
  // the same session later driven by a user agent gets the block again
  await chat("ses_helper", "plan");
  assert.deepEqual(await transform("ses_helper"), ["provider prompt", "block\n"]);
});

test("the helper set is bounded (1,000 most recent)", async (t) => {
  const { values, transform, chat } = await load(t);
  fs.writeFileSync(values.block_file, "block\n");
  for (let i = 0; i <= 1000; i++) await chat(`ses_h${i}`, "memoryd-extract");
  assert.deepEqual(await transform("ses_h0"), ["provider prompt", "block\n"]); // evicted
  assert.deepEqual(await transform("ses_h1"), ["provider prompt"]);
  assert.deepEqual(await transform("ses_h1000"), ["provider prompt"]);
});

test("opencode's title-generation call is skipped (built-in or configured title prompt)", async (t) => {
  const { values, hooks, transform } = await load(t);
  fs.writeFileSync(values.block_file, "block\n");
  assert.deepEqual(await transform("ses_user", [TITLE_SYSTEM]), [TITLE_SYSTEM]);
  assert.deepEqual(await transform("ses_user", ["You are opencode.\n<env>"]), ["You are opencode.\n<env>", "block\n"]);
  await hooks.config({ agent: { title: { prompt: "Name this chat in three words." } } });
  assert.deepEqual(await transform("s", ["Name this chat in three words.\nuser system"]).then((s) => s.length), 1);
  await hooks.config({ agent: { title: { prompt: "" } } }); // empty: ignored, not a match-all prefix
  assert.equal((await transform("s", ["anything"])).length, 2);
});

test("hooks never throw, whatever they are given", async (t) => {
  const { values, hooks } = await load(t);
  fs.writeFileSync(values.block_file, "block\n");
  const nasty = [
    [undefined, undefined], [null, null], [{}, {}], [{ sessionID: "s" }, undefined],
    [{ sessionID: "s" }, { system: "not an array" }], [{ sessionID: "s" }, { system: null }],
    [{ sessionID: "s" }, { get system() { throw new Error("boom"); } }],
    [{ sessionID: "s" }, { system: Object.freeze(["frozen"]) }], [{ sessionID: 42 }, { text: 42 }],
    [{ sessionID: "s", agent: {} }, { message: { agent: 7 } }], [{ sessionID: "s" }, { text: "<memory-citation>" }],
    [{ sessionID: "s" }, { text: "<memory-citation><session_ids>ses_abcdefg</session_ids></memory-citation>" }],
  ];
  for (const name of Object.keys(hooks).filter((k) => typeof hooks[k] === "function")) {
    for (const [input, output] of nasty) {
      const run = () => hooks[name](input, output);
      await assert.doesNotReject(async () => run(), `${name}(${JSON.stringify(input)})`);
    }
  }
  // a block path that is a directory: the read fails inside the hook, the turn goes on
  fs.rmSync(values.block_file);
  fs.mkdirSync(values.block_file);
  const output = { system: ["p"] };
  await hooks["experimental.chat.system.transform"]({ sessionID: "s" }, output);
  assert.deepEqual(output.system, ["p"]);
});

test("an unwritable spool does not throw and the text is still stripped", async (t) => {
  const { values, hooks } = await load(t);
  fs.mkdirSync(path.dirname(values.spool_file), { recursive: true });
  fs.mkdirSync(values.spool_file); // appendFileSync on a directory fails
  const output = { text: "Hi.\n<memory-citation><session_ids>ses_abcdefg</session_ids></memory-citation>" };
  await hooks["experimental.text.complete"]({ sessionID: "s", messageID: "m", partID: "p" }, output);
  assert.equal(output.text, "Hi.");
});

test("text.complete agrees with memoryd.read.citations on every golden case", async (t) => {
  const { values, hooks } = await load(t);
  const spooled = () => (fs.existsSync(values.spool_file) ? fs.readFileSync(values.spool_file, "utf8") : "");
  assert.ok(GOLDEN.length >= 8);
  for (const [i, c] of GOLDEN.entries()) {
    const before = spooled();
    const output = { text: c.text };
    const input = { sessionID: "ses_golden", messageID: `msg_${i}`, partID: `prt_${i}` };
    const t0 = Date.now();
    await hooks["experimental.text.complete"](input, output);
    assert.equal(output.text, c.stripped, `${c.name}: stripped text`);
    // The hook parses only texts that strip_citations would touch, and spools only real citations.
    const touched = c.text.toLowerCase().includes("<memory-citation");
    const lines = spooled().slice(before.length).split("\n").filter(Boolean);
    if (!touched || (c.session_ids.length === 0 && c.entries.length === 0)) {
      assert.equal(lines.length, 0, `${c.name}: nothing spooled`);
      continue;
    }
    assert.equal(lines.length, 1, `${c.name}: one spool line`);
    const rec = JSON.parse(lines[0]);
    assert.deepEqual(Object.keys(rec), ["v", "session_id", "message_id", "part_id", "cited", "entries", "ts"]);
    assert.equal(rec.v, 1);
    assert.deepEqual([rec.session_id, rec.message_id, rec.part_id], ["ses_golden", `msg_${i}`, `prt_${i}`]);
    assert.deepEqual(rec.cited, c.session_ids, `${c.name}: session ids`);
    assert.deepEqual(rec.entries, c.entries, `${c.name}: entries`);
    assert.ok(rec.ts >= t0 && rec.ts <= Date.now());
  }
  assert.ok(spooled().endsWith("\n"));
});

test("no citation: text untouched, no fs call, no spool dir", async (t) => {
  const { values, hooks } = await load(t);
  const counts = countFs(t);
  const output = { text: "Plain reply.\n\n\n\nwith blank lines and trailing space  " };
  await hooks["experimental.text.complete"]({ sessionID: "s", messageID: "m", partID: "p" }, output);
  assert.equal(output.text, "Plain reply.\n\n\n\nwith blank lines and trailing space  ");
  assert.equal(total(counts), 0);
  assert.equal(fs.existsSync(path.dirname(values.spool_file)), false);
});

test("server file: written atomically at load, mode 0600, with the host's coordinates", async (t) => {
  const { values } = await load(t);
  const st = fs.statSync(values.server_file);
  assert.equal(st.mode & 0o777, 0o600);
  const info = JSON.parse(fs.readFileSync(values.server_file, "utf8"));
  assert.deepEqual(Object.keys(info), ["url", "pid", "username", "password", "version", "ts"]);
  assert.equal(info.url, "http://127.0.0.1:4321/");
  assert.equal(info.pid, process.pid);
  assert.equal(info.username, "opencode");
  assert.equal(info.password, null);
  assert.equal(info.version, "9.9.9-test");
  assert.ok(Math.abs(Date.now() - info.ts) < 60_000);
  assert.deepEqual(fs.readdirSync(path.dirname(values.server_file)).filter((n) => n.includes("tmp")), []);

  const other = await load(t, { env: { OPENCODE_SERVER_USERNAME: "u", OPENCODE_SERVER_PASSWORD: "s3cret" } });
  const auth = JSON.parse(fs.readFileSync(other.values.server_file, "utf8"));
  assert.deepEqual([auth.username, auth.password], ["u", "s3cret"]);
});

test("load never touches the host API (defect 1) and survives a broken ctx", async (t) => {
  const touched = [];
  const client = new Proxy({}, { get: (_, key) => { touched.push(String(key)); throw new Error("no calls at load"); } });
  const { values } = await load(t, { ctx: { client, serverUrl: new URL("http://127.0.0.1:1/"), directory: "/" } });
  assert.deepEqual(touched, []);
  assert.ok(fs.existsSync(values.server_file));
  const broken = await load(t, { ctx: { get serverUrl() { throw new Error("no url"); } } });
  assert.equal(typeof broken.hooks["experimental.chat.system.transform"], "function");
  const nothing = await load(t, { ctx: undefined });
  assert.equal(typeof nothing.hooks["chat.message"], "function");
});

test("citations quoted inside memoryd's helper sessions are stripped but never spooled", async (t) => {
  const { values, hooks, chat } = await load(t);
  await chat("ses_helper", "memoryd-extract");
  const output = { text: "Quote.\n<memory-citation><session_ids>ses_abcdefg</session_ids></memory-citation>" };
  await hooks["experimental.text.complete"]({ sessionID: "ses_helper", messageID: "m", partID: "p" }, output);
  assert.equal(output.text, "Quote.");
  assert.equal(fs.existsSync(values.spool_file), false);
});

// ---- project scopes ----------------------------------------------------------------------------
const KEYS = JSON.parse(fs.readFileSync(path.join(ROOT, "tests", "golden", "scope_keys.json"), "utf8"));

async function loadIn(t, ctx, before = () => {}) {
  // render once without loading the plugin to learn the paths, so files can exist before load
  const probe = await load(t, { ctx: undefined });
  before(probe.values);
  const hooks = await probe.mod.MemorydShim({ serverUrl: new URL("http://127.0.0.1:4321"), ...ctx });
  const transform = async (sessionID) => {
    const output = { system: ["provider prompt"] };
    await hooks["experimental.chat.system.transform"]({ sessionID, model: { id: "m" } }, output);
    return output.system;
  };
  return { values: probe.values, transform, hooks, dir: probe.dir };
}

test("project keys are the same as memoryd's (tests/golden/scope_keys.json)", async (t) => {
  for (const [root, key] of Object.entries(KEYS)) {
    const { values } = await loadIn(t, { worktree: root, directory: root });
    if (root === "/") continue; // worktree "/" means a loose folder: scoped to its directory
    assert.ok(fs.existsSync(path.join(values.seen_dir, key)), `${root} -> ${key}`);
  }
  const loose = await loadIn(t, { worktree: "/", directory: "/home/dev/src/memoryd" });
  assert.deepEqual(fs.readdirSync(loose.values.seen_dir), [KEYS["/home/dev/src/memoryd"]]);
});

test("a project instance stats only its own block: once per request, 10,000 requests", async (t) => {
  const key = KEYS["/home/dev/src/memoryd"];
  const { values, transform } = await loadIn(t, { worktree: "/home/dev/src/memoryd", directory: "/home/dev/src/memoryd/sub" });
  assert.equal(fs.readFileSync(path.join(values.seen_dir, key), "utf8"), "/home/dev/src/memoryd\n");
  fs.mkdirSync(values.projects_dir, { recursive: true });
  fs.writeFileSync(values.block_file, "global only\n");
  fs.writeFileSync(path.join(values.projects_dir, `${key}.md`), "global + project\n");
  assert.deepEqual(await transform("s"), ["provider prompt", "global + project\n"]);
  const counts = countFs(t);
  for (let i = 0; i < 10_000; i++) {
    if ((await transform("s"))[1] !== "global + project\n") assert.fail(`call ${i}`);
  }
  assert.deepEqual(counts, { statSync: 10_000 });
});

test("until memoryd renders the project's block, the global block from load time is used", async (t) => {
  const key = KEYS["/home/dev/src/memoryd"];
  const { values, transform } = await loadIn(t, { worktree: "/home/dev/src/memoryd", directory: "/home/dev/src/memoryd" },
    (v) => { fs.mkdirSync(path.dirname(v.block_file), { recursive: true }); fs.writeFileSync(v.block_file, "global at load\n"); });
  fs.writeFileSync(values.block_file, "global changed later\n"); // not looked at: no second stat
  const counts = countFs(t);
  assert.deepEqual(await transform("s"), ["provider prompt", "global at load\n"]);
  assert.deepEqual(counts, { statSync: 1 });
  fs.mkdirSync(values.projects_dir, { recursive: true });
  fs.writeFileSync(path.join(values.projects_dir, `${key}.md`), "rendered for the project\n");
  assert.deepEqual(await transform("s"), ["provider prompt", "rendered for the project\n"]);
});

test("a folder of another project never sees this project's block", async (t) => {
  const a = KEYS["/home/dev/src/memoryd"];
  const { values, transform } = await loadIn(t, { worktree: "/home/dev/src/memoryd-wt2", directory: "/home/dev/src/memoryd-wt2" });
  fs.mkdirSync(values.projects_dir, { recursive: true });
  fs.writeFileSync(path.join(values.projects_dir, `${a}.md`), "A's facts\n");
  assert.deepEqual(await transform("s"), ["provider prompt"]);
});

test("tools: a project instance tells memoryd its project, so a call sees nothing else", async (t) => {
  const { hooks, dir } = await loadIn(t, { worktree: "/home/dev/src/memoryd", directory: "/home/dev/src/memoryd" });
  const out = await hooks.tool.memory_search.execute({ query: "q" }, { sessionID: "ses_abc123" });
  assert.deepEqual(JSON.parse(out).rest,
    ["--session", "ses_abc123", "--project", KEYS["/home/dev/src/memoryd"], "--server", "http://127.0.0.1:4321/"]);
  assert.ok(dir);
});

test("tools: each spec becomes an opencode plugin tool with plain JSON-schema arguments", async (t) => {
  const { hooks, values } = await load(t);
  assert.deepEqual(Object.keys(hooks.tool), ["memory_search", "memory_note"]);
  for (const [name, spec] of Object.entries(values.tool_specs)) {
    assert.equal(hooks.tool[name].description, spec.description);
    assert.deepEqual(hooks.tool[name].args, spec.args);
    assert.equal(typeof hooks.tool[name].execute, "function");
  }
});

test("tools: a call runs the memoryd command once with the arguments, session, server and home", async (t) => {
  const { hooks, dir } = await load(t);
  const out = await hooks.tool.memory_search.execute({ query: "ruff \"lint\" $HOME" }, { sessionID: "ses_abc123" });
  assert.deepEqual(JSON.parse(out), {
    name: "memory_search", args: { query: 'ruff "lint" $HOME' },
    rest: ["--session", "ses_abc123", "--server", "http://127.0.0.1:4321/"], home: path.join(dir, "home"),
  });
  // a note's session is read from the server this instance runs on; no http(s) URL, no --server
  const note = await hooks.tool.memory_note.execute({ note: "n" }, { sessionID: "ses_abc123" });
  assert.deepEqual(JSON.parse(note).rest, ["--session", "ses_abc123", "--server", "http://127.0.0.1:4321/"]);
  const bare = await load(t, { ctx: { serverUrl: "unix:///x", directory: dir } });
  const none = await bare.hooks.tool.memory_note.execute({ note: "n" }, { sessionID: "ses_abc123" });
  assert.deepEqual(JSON.parse(none).rest, ["--session", "ses_abc123"]);
});

test("tools: a failed call rejects with memoryd's own message", async (t) => {
  const { hooks } = await load(t, { specs: { fail: { description: "x", args: {} } } });
  await assert.rejects(hooks.tool.fail.execute({}, { sessionID: "s" }), { message: "nothing found for that" });
});

test("tools: an aborted call kills the memoryd process", async (t) => {
  const { hooks } = await load(t, { specs: { hang: { description: "x", args: {} } } });
  const abort = new AbortController();
  const started = Date.now();
  const call = hooks.tool.hang.execute({}, { sessionID: "s", abort: abort.signal });
  setTimeout(() => abort.abort(), 200);
  await assert.rejects(call);
  assert.ok(Date.now() - started < 10000);
});
