// Read-path benchmark: what the opencode shim's experimental.chat.system.transform costs per model
// request when the block file has not changed, beside a bare fs.statSync loop in the same run.
//
//   node bench/readpath.mjs [--calls N] [--block-kb N] [--reps N]
//
// The shim is rendered from templates/opencode/memoryd.js into a temp dir (placeholders filled
// with JSON literals, as memoryd does) and driven directly, without opencode. fs calls per hook
// call are counted in a separate pass by wrapping every *Sync function of node:fs (the object the
// shim calls through), so the counting does not slow the timed loops.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath, pathToFileURL } from "node:url";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const CALLS = opt("calls", 200_000), BLOCK_KB = opt("block-kb", 8), REPS = opt("reps", 5);

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const template = fs.readFileSync(path.join(ROOT, "templates", "opencode", "memoryd.js"), "utf8");
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "memoryd-bench-readpath-"));
process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true }));
const values = {
  block_file: path.join(dir, "readpath", "block.md"),
  spool_file: path.join(dir, "spool", "citations.jsonl"),
  server_file: path.join(dir, "opencode-server.json"),
  helper_agent_prefix: "memoryd-",
  memoryd_version: "bench",
};
const rendered = template.replace(/\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g, (m, name) => {
  if (!(name in values)) throw new Error(`no value for ${m}`);
  return JSON.stringify(values[name]);
});
fs.writeFileSync(path.join(dir, "memoryd.mjs"), rendered);
fs.mkdirSync(path.dirname(values.block_file), { recursive: true });
const block = "## Memory\n" + "- a remembered fact, about sixty characters long, give or take\n".repeat(
  Math.ceil((BLOCK_KB * 1024) / 64));
fs.writeFileSync(values.block_file, block);

const { MemorydShim } = await import(pathToFileURL(path.join(dir, "memoryd.mjs")).href);
const hooks = await MemorydShim({ serverUrl: new URL("http://127.0.0.1:4096") });
const transform = hooks["experimental.chat.system.transform"];
const input = { sessionID: "ses_bench", model: { id: "m", providerID: "p" } };

async function hookLoop(n) {
  for (let i = 0; i < n; i++) {
    const output = { system: ["provider prompt"] };
    await transform(input, output);
    if (output.system.length !== 2) throw new Error("block not pushed");
  }
}

async function statLoop(n) { // the same await per call, so only the hook's own work differs
  for (let i = 0; i < n; i++) {
    const output = { system: ["provider prompt"] };
    await (async () => fs.statSync(values.block_file, { throwIfNoEntry: false }))();
    output.system.push(block);
  }
}

// fs calls per hook call (a separate, instrumented pass)
const counts = {};
const originals = {};
for (const name of Object.keys(fs)) {
  if (typeof fs[name] !== "function" || !name.endsWith("Sync")) continue;
  const orig = (originals[name] = fs[name]);
  fs[name] = function (...a) { counts[name] = (counts[name] ?? 0) + 1; return orig.apply(this, a); };
}
await hookLoop(1); // fills the cache: the only read
for (const k of Object.keys(counts)) delete counts[k];
const COUNTED = 10_000;
await hookLoop(COUNTED);
Object.assign(fs, originals);
const perCall = Object.entries(counts).map(([k, v]) => `${k} ${v / COUNTED}`).join(", ") || "none";

// timing: interleaved reps, best of each (least disturbed by the rest of the machine)
const best = { hook: Infinity, stat: Infinity };
await hookLoop(20_000);
await statLoop(20_000);
for (let r = 0; r < REPS; r++) {
  for (const [name, loop] of [["hook", hookLoop], ["stat", statLoop]]) {
    const t0 = performance.now();
    await loop(CALLS);
    best[name] = Math.min(best[name], (performance.now() - t0) / CALLS);
  }
}

const fmt = (ms) => `${(ms * 1000).toFixed(2)} us/call, ${Math.round(1000 / ms).toLocaleString("en-US")} calls/s`;
const runtime = typeof Bun === "undefined" ? `node ${process.version}` : `bun ${Bun.version}`;
console.log(`read path: transform hook, unchanged ${(block.length / 1024).toFixed(1)} KB block, ` +
  `${CALLS.toLocaleString("en-US")} calls x ${REPS} reps (best), ${runtime}, ${os.cpus().length} CPUs`);
console.log(`  shim hook      ${fmt(best.hook)}   fs calls per call: ${perCall}`);
console.log(`  bare statSync  ${fmt(best.stat)}   fs calls per call: statSync 1`);
console.log(`  ratio          ${(best.hook / best.stat).toFixed(2)}x bare statSync ` +
  `(hook overhead ${((best.hook - best.stat) * 1000).toFixed(2)} us/call)`);
console.log(`  (the TypeScript plugin: 9 file syscalls per request; see ts-plugin-measured.md)`);
