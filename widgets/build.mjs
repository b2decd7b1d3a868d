// Bundle src/editor.js and its CodeMirror packages into one ES module the wheel ships:
// stitchcuda_lab/jupyter/static/editor.js (committed; nothing is fetched at run time).
//
//   npm ci && npm run build      # rewrite the bundle
//   npm run check                # exit 1 when the committed bundle differs from a fresh build
import { build } from "esbuild";
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(here, "../stitchcuda_lab/jupyter/static/editor.js");
const result = await build({
  entryPoints: [resolve(here, "src/editor.js")],
  bundle: true, format: "esm", minify: true, target: "es2020", legalComments: "eof",
  write: false, logLevel: "warning",
});
const text = result.outputFiles[0].text;
if (process.argv.includes("--check")) {
  let current = "";
  try { current = readFileSync(out, "utf8"); } catch { /* missing */ }
  if (current !== text) {
    console.error(`${out} is stale: run npm run build in widgets/`);
    process.exit(1);
  }
  console.log("bundle up to date");
} else {
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, text);
  console.log(`wrote ${out} (${(text.length / 1024).toFixed(0)} KiB)`);
}
