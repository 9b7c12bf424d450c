"use strict";
/**
 * Lets `node` run this package's TypeScript sources (`node -r ./bin/register-ts.js file.ts`): the benchmark
 * drivers (`npm run bench:node`, `bench:attack`) and, when the node's code itself runs from the sources (tests,
 * scripts), its signer worker thread (node/core/signerWorker.ts preloads this file in the worker). Each `.ts` file
 * is transpiled on require with the TypeScript compiler's `transpileModule` (no type check: types are checked by
 * `npm run lint`), with an inline source map so stack traces name TypeScript lines. The node that ships does not
 * use it: bin/ats-node.js runs the compiled dist/ (bin/build-dist.js).
 *
 * Why not ts-node: `ts-node/register` loads Node's `repl` module, which loads `domain`, and once `domain` is
 * loaded every EventEmitter construction and emit in the process takes a slower path. For a server that is
 * ~10 % of the work of answering a request (measured with `node --cpu-prof` under load: EventEmitter.init in
 * node:domain). Tests and Hardhat scripts keep Hardhat's own ts-node.
 *
 * A file that fails to transpile (a syntax error) throws with TypeScript's message.
 */
const fs = require("node:fs");
const path = require("node:path");
const ts = require("typescript");

const TSCONFIG = path.join(__dirname, "..", "tsconfig.json");

function compilerOptions() {
  const read = ts.readConfigFile(TSCONFIG, ts.sys.readFile);
  if (read.error !== undefined) {
    throw new Error(`bin/register-ts.js: cannot read ${TSCONFIG}: ${ts.flattenDiagnosticMessageText(read.error.messageText, "\n")}`);
  }
  const { options } = ts.convertCompilerOptionsFromJson(read.config.compilerOptions, path.dirname(TSCONFIG));
  // One file at a time, emitted to memory: no output directory, no declaration files, source maps inline.
  return {
    ...options,
    // rootDir and outDir only shape emitted paths; a file outside rootDir (a script under /tmp) must still load.
    rootDir: undefined,
    outDir: undefined,
    declaration: false,
    sourceMap: false,
    inlineSourceMap: true,
    inlineSources: false,
    noEmit: false,
    isolatedModules: true,
  };
}

function register() {
  if (require.extensions[".ts"] !== undefined && require.extensions[".ts"].atsRegisterTs === true) return;
  const options = compilerOptions();
  const compile = (module, filename) => {
    const source = fs.readFileSync(filename, "utf8");
    const output = ts.transpileModule(source, { compilerOptions: options, fileName: filename, reportDiagnostics: true });
    const errors = (output.diagnostics ?? []).filter((d) => d.category === ts.DiagnosticCategory.Error);
    if (errors.length > 0) {
      const text = errors.map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n")).join("\n");
      throw new SyntaxError(`${filename}: ${text}`);
    }
    module._compile(output.outputText, filename);
  };
  compile.atsRegisterTs = true;
  require.extensions[".ts"] = compile;
  // Stack traces through the inline source maps (native in Node ≥ 16.6; costs only when a stack is formatted).
  process.setSourceMapsEnabled(true);
}

register();
