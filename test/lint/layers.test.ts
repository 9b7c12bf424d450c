/**
 * The import table of docs/architecture.md is enforced by ESLint (eslint.config.js: one eslint-plugin-boundaries
 * allow-list per row, import-x/no-cycle). These tests keep the table and the configuration equal, and lint in each
 * row a file importing one file of every other row, so a rule that stopped refusing would fail here, not silently.
 */
import { expect } from "chai";
import { ESLint, type Linter } from "eslint";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";

const ROOT = join(__dirname, "..", "..");
const ANYTHING = "*";

/** The import table of docs/architecture.md: row (`protocol/`, `node/config.ts`) → what it may import. */
function documentedTable(): Map<string, string[]> {
  const text = readFileSync(join(ROOT, "docs", "architecture.md"), "utf8");
  const start = text.indexOf("| folder | may import | what, and why |");
  expect(start, "docs/architecture.md has the import table").to.be.greaterThan(-1);
  const rows = text.slice(start).split("\n").slice(2);
  const table = new Map<string, string[]>();
  for (const row of rows) {
    if (!row.startsWith("|")) break;
    const [, folder, mayImport] = row.split("|").map((cell) => cell.trim());
    const name = /^`([^`]+)`$/.exec(folder ?? "")?.[1];
    expect(name, `a row names its folder or file in backticks: ${row}`).to.be.a("string");
    const allowed = mayImport === "anything" ? [ANYTHING] : mayImport === "nothing" ? [] : [...(mayImport ?? "").matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
    table.set(name!, allowed);
  }
  return table;
}

type DependenciesOptions = { policies: { allow: { to: { file: { path: string[] } } } }[] };

/** The same table read back from the lint configuration: each block carrying a boundaries/dependencies rule. */
function configuredTable(): Map<string, string[]> {
  // eslint.config.js is CommonJS: the array ESLint itself loads.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const config = require(join(ROOT, "eslint.config.js")) as Linter.Config[];
  const table = new Map<string, string[]>();
  const entryOf = (glob: string): string => (glob.endsWith("/**") ? glob.slice(0, -2) : glob);
  for (const block of config) {
    const rule = block.rules?.["boundaries/dependencies"];
    if (rule === undefined || block.files === undefined) continue;
    expect(block.files, "one row per block").to.have.length(1);
    const entry = entryOf(String(block.files[0]));
    if (rule === "off") {
      table.set(entry, [ANYTHING]);
      continue;
    }
    const [, options] = rule as [string, DependenciesOptions];
    expect(options.policies, `${entry}: one policy`).to.have.length(1);
    const globs = options.policies[0]!.allow.to.file.path.map(entryOf);
    expect(globs[0], `${entry}: a row may import its own files`).to.equal(entry);
    table.set(entry, globs.slice(1));
  }
  return table;
}

/** Whether `file` (relative to the root) lies in `entry` (a folder `x/` or a file). */
function within(file: string, entry: string): boolean {
  return entry.endsWith("/") ? file.startsWith(entry) : file === entry;
}

/** One real file per row, and per single file a row names (what a probe imports). */
function targets(table: Map<string, string[]>): string[] {
  const chosen = new Set<string>();
  const firstSource: Record<string, string> = {
    "protocol/": "protocol/codec.ts",
    "wire/": "wire/rest.ts",
    "lib/": "lib/settings.ts",
    "abi/": "abi/index.ts",
    "client/": "client/index.ts",
    "deploy/": "deploy/index.ts",
    "testing/": "testing/index.ts",
    "gateway/": "gateway/methods.ts",
    "relayer/": "relayer/decide.ts",
    "upgrade/": "upgrade/batches.ts",
    "catalog/": "catalog/settings.ts",
    "explorer/": "explorer/src/format.ts",
    "node/keysource/": "node/keysource/load.ts",
    "node/card/": "node/card/types.ts",
    "node/core/": "node/core/types.ts",
    "node/api/": "node/api/rest.ts",
    "node/mesh/": "node/mesh/index.ts",
    "node/schedules/": "node/schedules/service.ts",
    "node/ntp/": "node/ntp/server.ts",
    "scripts/": "scripts/deploy.ts",
    "bin/": "bin/build-dist.js",
    "test/": "test/vectors/build-vectors.ts",
    "test-system/": "test-system/explorer.test.ts",
    "examples/": "examples/dapp/hardhat.config.ts",
  };
  for (const [entry, allowed] of table) {
    for (const name of [entry, ...allowed.filter((target) => target !== ANYTHING)]) {
      const file = name.endsWith("/") ? firstSource[name] : name;
      expect(file, `a file to import for ${name}`).to.be.a("string");
      chosen.add(file!);
    }
  }
  for (const file of chosen) expect(existsSync(join(ROOT, file)), file).to.equal(true);
  return [...chosen].sort();
}

/** A file of the row to lint: the row's file itself, or a new file in its folder. */
function probePath(entry: string): string {
  return entry.endsWith("/") ? `${entry}importTableProbe.ts` : entry;
}

function specifier(from: string, target: string): string {
  const path = relative(dirname(from), target).replace(/\.ts$/, "");
  return path.startsWith(".") ? path : `./${path}`;
}

describe("the import table (docs/architecture.md, eslint.config.js)", function () {
  this.timeout(300_000);

  const table = documentedTable();
  // The table's rules only: the cycle rule would see the probes' own imports as cycles (tested below on its own).
  const eslint = new ESLint({ cwd: ROOT, overrideConfig: { rules: { "import-x/no-cycle": "off" } } });

  async function lint(path: string, source: string): Promise<Linter.LintMessage[]> {
    const [result] = await eslint.lintText(source, { filePath: join(ROOT, path) });
    return result?.messages ?? [];
  }

  it("is the same in the documentation and in the lint configuration", () => {
    expect(Object.fromEntries(configuredTable())).to.deep.equal(Object.fromEntries(table));
  });

  const files = targets(table);
  for (const [entry, allowed] of table) {
    const mayImport = (file: string): boolean => allowed.includes(ANYTHING) || [entry, ...allowed].some((name) => within(file, name));
    it(`${entry}: refuses every import outside its row, allows the rest`, async () => {
      const probe = probePath(entry);
      const imported = files.filter((file) => file !== probe);
      const source = imported.map((file, i) => `import * as m${i} from "${specifier(probe, file)}";`).join("\n") + "\nexport {};\n";
      const messages = await lint(probe, source);
      const refused = messages.filter((m) => m.ruleId === "boundaries/dependencies");
      const refusedFiles = refused.map((m) => imported[m.line - 1]);
      expect(refusedFiles, `${probe}: the refused imports`).to.deep.equal(imported.filter((file) => !mayImport(file)));
      for (const message of refused) expect(message.message).to.contain(`${entry} may import only`);
      expect(messages.filter((m) => m.fatal === true || m.ruleId === "boundaries/no-unknown-files")).to.deep.equal([]);
    });
  }

  it("checks dynamic imports, type-only imports and re-exports too", async () => {
    const refused = async (source: string) =>
      (await lint("node/core/importTableProbe.ts", source)).filter((m) => m.ruleId === "boundaries/dependencies").length;
    expect(await refused(`export async function f() {\n  return import("../mesh/index");\n}\n`)).to.equal(1);
    expect(await refused(`import type { MeshOptions } from "../mesh/index";\nexport type Y = MeshOptions;\n`)).to.equal(1);
    expect(await refused(`export * from "../api/rest";\n`)).to.equal(1);
  });

  it("refuses a TypeScript source in no row of the table", async () => {
    const messages = await lint("newfolder/example.ts", `import { x } from "../protocol/codec";\nexport const y = x;\n`);
    expect(messages.map((m) => m.ruleId)).to.include("boundaries/no-unknown-files");
  });

  it("refuses an import cycle (import-x/no-cycle)", async () => {
    const withCycles = new ESLint({ cwd: ROOT });
    // protocol/codec.ts imports protocol/constants.ts: constants importing codec closes a cycle.
    expect(readFileSync(join(ROOT, "protocol", "codec.ts"), "utf8")).to.match(/from "\.\/constants"/);
    const [result] = await withCycles.lintText(`import { encodeTimeProof } from "./codec";\nexport const y = encodeTimeProof;\n`, {
      filePath: join(ROOT, "protocol", "constants.ts"),
    });
    expect((result?.messages ?? []).map((m) => m.ruleId)).to.include("import-x/no-cycle");
  });
});
