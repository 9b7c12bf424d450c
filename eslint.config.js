// ESLint (flat config) for the TypeScript sources: typescript-eslint's recommended rules plus the import table of
// docs/architecture.md, so an import that breaks a layer, or closes a cycle, fails `npm run lint` (and so `npm test`).
// Not type-checked rules: `tsc --noEmit` already runs strict in the same script, and type-aware linting of the
// whole tree costs minutes on a 2-core machine.
"use strict";
const js = require("@eslint/js");
const tseslint = require("typescript-eslint");
const boundaries = require("eslint-plugin-boundaries");
const importX = require("eslint-plugin-import-x");

/**
 * Who may import whom (docs/architecture.md §1, "The import table"; test/lint/layers.test.ts keeps the two equal).
 * A key is an element of the tree: a folder (`x/`) or a file of node/ with a job of its own; a value lists what its
 * files may import besides their own element: elements, or single files of one (`gateway/server.ts`). Every other
 * import between elements is an error, and so is a source file outside every element, so a new folder starts with
 * a row here. node/'s order, outermost last: keysource ◄ card ◄ core ◄ {api, mesh, schedules, ntp} ◄ compose ◄
 * server ◄ devNode ◄ {devNodeProcess, cluster} ◄ cli; config.ts is the settings leaf all but core may read.
 */
const ALLOWED_IMPORTS = {
  "protocol/": [],
  "wire/": ["protocol/"],
  "lib/": ["protocol/", "wire/"],
  "abi/": [],
  "client/": ["protocol/", "wire/", "abi/"],
  "deploy/": ["protocol/", "abi/"],
  "testing/": ["protocol/", "client/", "deploy/"],
  "gateway/": ["protocol/", "wire/", "lib/"],
  "relayer/": ["protocol/", "wire/", "lib/", "abi/", "client/"],
  "upgrade/": ["protocol/", "wire/", "lib/", "abi/", "client/"],
  "catalog/": ["protocol/", "wire/", "lib/", "client/"],
  "explorer/": ["wire/", "client/browser.ts"],
  "node/config.ts": ["protocol/", "wire/", "lib/", "gateway/config.ts"],
  "node/keysource/": ["protocol/", "node/config.ts"],
  "node/card/": ["protocol/", "node/config.ts", "node/keysource/"],
  "node/core/": ["protocol/", "wire/", "lib/", "package.json", "node/card/"],
  "node/api/": ["protocol/", "wire/", "lib/", "node/config.ts", "node/card/", "node/core/"],
  "node/mesh/": ["protocol/", "wire/", "lib/", "package.json", "node/config.ts", "node/card/", "node/core/"],
  "node/schedules/": ["protocol/", "lib/", "node/core/"],
  "node/ntp/": ["protocol/", "lib/", "node/card/", "node/core/"],
  "node/compose.ts": ["protocol/", "node/config.ts", "node/keysource/", "node/card/", "node/core/", "node/mesh/", "node/schedules/"],
  "node/server.ts": ["protocol/", "lib/", "gateway/server.ts", "gateway/config.ts", "node/config.ts", "node/core/", "node/api/", "node/ntp/", "node/compose.ts"],
  "node/devNode.ts": ["protocol/", "node/config.ts", "node/server.ts"],
  "node/devNodeProcess.ts": ["protocol/", "lib/", "node/config.ts", "node/devNode.ts"],
  "node/cluster.ts": ["protocol/", "node/config.ts", "node/devNode.ts", "node/devNodeProcess.ts"],
  "node/manifestServices.ts": ["protocol/", "wire/", "client/", "node/ntp/"],
  "node/cli.ts": ["protocol/", "wire/", "lib/", "client/", "package.json", "node/config.ts", "node/keysource/", "node/devNode.ts", "node/cluster.ts", "node/manifestServices.ts"],
  "scripts/": ["protocol/", "wire/", "lib/", "abi/", "client/", "deploy/", "upgrade/", "catalog/", "bin/",
    "node/config.ts", "node/keysource/", "node/card/", "node/core/", "node/mesh/", "node/ntp/", "node/compose.ts", "node/server.ts", "node/devNode.ts", "node/devNodeProcess.ts", "node/cluster.ts"],
  "scripts/gen-vectors.ts": ["protocol/", "scripts/", "test/"],
  "test/": ["*"],
  "test-system/": ["*"],
  "examples/": [],
};

/** The files a key or value of ALLOWED_IMPORTS names: a folder's whole tree, or the file itself. */
function filesOf(entry) {
  return entry.endsWith("/") ? `${entry}**` : entry;
}

/**
 * boundaries/elements: every folder of ALLOWED_IMPORTS (node/'s folders before node/ itself, whose own files are
 * told apart by path), so that a source file in no folder of the table is an error (boundaries/no-unknown-files).
 */
const FOLDERS = Object.keys(ALLOWED_IMPORTS).filter((entry) => entry.endsWith("/"));
const ELEMENTS = [...FOLDERS, "node/"].map((folder) => ({ type: folder, pattern: folder.slice(0, -1), partialMatch: false }));

/**
 * One config block per key of ALLOWED_IMPORTS (a later block wins for the files both match: scripts/gen-vectors.ts
 * after scripts/), each with one boundaries/dependencies policy, so a file's imports are weighed against its own
 * row only: refuse what lies outside its own files and its list, with a message naming the list.
 */
const IMPORT_TABLE_BLOCKS = Object.entries(ALLOWED_IMPORTS).map(([entry, allowed]) => {
  const files = [filesOf(entry)];
  if (allowed.includes("*")) return { files, rules: { "boundaries/dependencies": "off" } };
  const globs = [entry, ...allowed].map(filesOf);
  const policy = {
    // micromatch reads a one-item {a} literally
    disallow: { to: { file: { path: globs.length === 1 ? `!${globs[0]}` : `!{${globs.join(",")}}` } } },
    allow: { to: { file: { path: globs } } },
    message: `${entry} may import only ${allowed.length === 0 ? "its own files" : allowed.join(", ")} (the import table of docs/architecture.md)`,
  };
  return { files, rules: { "boundaries/dependencies": ["error", { default: "disallow", checkUnknownLocals: true, checkInternals: true, policies: [policy] }] } };
});

module.exports = tseslint.config(
  // .dist-build-<pid>/ and .dist-old-<pid>/: bin/build-dist.js staging folders (a killed build leaves one behind).
  { ignores: ["node_modules/**", "artifacts/**", "cache/**", "dist/**", "dist-bench/**", ".dist-build-*/**", ".dist-old-*/**", "typechain-types/**", "coverage/**", "**/*.js"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ["**/*.ts"],
    rules: {
      // Unused names fail tsc already (noUnusedLocals / noUnusedParameters); `_`-prefixed ones are deliberate.
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none" }],
      // Non-null assertions are used after explicit bounds checks (indexing); tsc's noUncheckedIndexedAccess asks for them.
      "@typescript-eslint/no-non-null-assertion": "off",
    },
  },
  // One ABI source: the generated abi/ (scripts/gen-abi.ts, `as const`), so that viem type-checks every contract
  // call's functionName and args, and every decoded event and result. A hand-written fragment or a cast to `Abi`
  // switches that check off; a cast on a call's abi, functionName or args hides a mismatch.
  {
    files: ["**/*.ts"],
    ignores: ["abi/**"],
    rules: {
      "no-restricted-syntax": [
        "error",
        ...["parseAbi", "parseAbiItem"].map((name) => ({
          selector: `CallExpression[callee.name='${name}']`,
          message: `${name}: contract ABIs come from the generated abi/ (npm run abi), typed \`as const\`; import them from there.`,
        })),
        {
          selector: "ObjectExpression:has(> Property:matches([key.name='type'], [key.value='type'])[value.value=/^(function|event|error|constructor)$/]):has(> Property:matches([key.name='inputs'], [key.value='inputs']))",
          message: "An ABI item literal: contract ABIs come from the generated abi/ (npm run abi); import them from there.",
        },
        {
          selector: "TSAsExpression > TSTypeReference.typeAnnotation[typeName.name='Abi']",
          message: "`as Abi` switches off viem's checking of functionName and args: pass the generated abi/ constant itself (or declare `const x: Abi = …` for untyped JSON).",
        },
        {
          selector: "Property[key.name=/^(abi|functionName|args|eventName)$/] > TSAsExpression.value",
          message: "A cast on a contract call's abi, functionName, args or eventName hides a mismatch viem would report: fix the types instead.",
        },
      ],
    },
  },
  // The import table and no cycles, over every TypeScript source (tests included: a cycle there is one too) but the
  // Hardhat configuration, which imports packages only.
  {
    files: ["**/*.ts"],
    ignores: ["hardhat.config.ts"],
    plugins: { boundaries, "import-x": importX },
    settings: {
      "boundaries/root-path": __dirname,
      "boundaries/elements": ELEMENTS,
      // boundaries resolves through eslint-module-utils ("import/resolver"), import-x through its own setting.
      "import/resolver": { node: { extensions: [".ts", ".js", ".json"] } },
      "import-x/resolver-next": [importX.createNodeResolver({ extensions: [".ts", ".js", ".json"] })],
      "import-x/parsers": { "@typescript-eslint/parser": [".ts"] },
      // The cycle rule follows our TypeScript only: following the packages' JavaScript too cost it minutes.
      "import-x/extensions": [".ts"],
    },
    rules: {
      "boundaries/no-unknown-files": "error",
      "import-x/no-cycle": "error",
    },
  },
  ...IMPORT_TABLE_BLOCKS,
);
