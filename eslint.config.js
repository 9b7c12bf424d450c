// ESLint (flat config) for the TypeScript sources: typescript-eslint's recommended rules plus the layer rules of
// docs/architecture.md, so an import that breaks a layer fails `npm run lint` (and so `npm test`).
// Not type-checked rules: `tsc --noEmit` already runs strict in the same script, and type-aware linting of the
// whole tree costs minutes on a 2-core machine.
"use strict";
const js = require("@eslint/js");
const tseslint = require("typescript-eslint");

/** A no-restricted-imports rule forbidding `groups` of relative import paths, with the reason shown. */
function forbid(groups, message) {
  return ["error", { patterns: [{ group: groups, message }] }];
}

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
  // Layers (docs/architecture.md): a layer imports only layers below it; nothing in production imports tests.
  {
    files: ["protocol/**/*.ts"],
    rules: {
      "no-restricted-imports": forbid(
        ["**/node/**", "**/client/**", "**/scripts/**", "**/test/**", "**/contracts/**"],
        "protocol/ is the bottom layer: wire format and crypto only; it imports no program, script or test.",
      ),
    },
  },
  {
    files: ["node/**/*.ts"],
    rules: {
      "no-restricted-imports": forbid(["**/scripts/**", "**/test/**"], "node/ is a program: it never imports scripts or tests."),
    },
  },
  {
    files: ["relayer/**/*.ts"],
    rules: {
      "no-restricted-imports": forbid(
        ["**/node/**", "**/scripts/**", "**/test/**"],
        "The relayer is a program of its own: it imports protocol/, wire/, lib/ and client/ (proofs come from nodes over the network).",
      ),
    },
  },
  {
    files: ["gateway/**/*.ts"],
    rules: {
      "no-restricted-imports": forbid(
        ["**/node/**", "**/relayer/**", "**/upgrade/**", "**/scripts/**", "**/test/**"],
        "The temporal gateway is a program of its own: it imports protocol/, wire/, lib/ and client/ (it reads its node's time over the seam it is given, never node/ code).",
      ),
    },
  },
  {
    files: ["upgrade/**/*.ts"],
    rules: {
      "no-restricted-imports": forbid(
        ["**/node/**", "**/relayer/**", "**/scripts/**", "**/test/**"],
        "The upgrade agent is a program of its own: it imports protocol/, wire/, lib/ and client/ (it reads nodes over their public interfaces, never their code).",
      ),
    },
  },
  {
    files: ["testing/**/*.ts"],
    rules: {
      "no-restricted-imports": forbid(
        ["**/node/**", "**/relayer/**", "**/test/**"],
        "The test kit is for dApp tests: it imports protocol/, the client and the deploy tool only, never a server.",
      ),
    },
  },
  {
    files: ["client/**/*.ts"],
    rules: {
      "no-restricted-imports": forbid(
        ["**/node/**", "**/scripts/**", "**/test/**"],
        "The client library must not load the server: it imports protocol/ and wire/ only.",
      ),
    },
  },
  {
    files: ["lib/**/*.ts"],
    rules: {
      "no-restricted-imports": forbid(
        ["**/node/**", "**/client/**", "**/scripts/**", "**/test/**"],
        "lib/ is the platform layer under the programs: it imports protocol/ and wire/ only.",
      ),
    },
  },
  {
    files: ["wire/**/*.ts"],
    rules: {
      "no-restricted-imports": forbid(
        ["**/node/**", "**/client/**", "**/scripts/**", "**/test/**"],
        "wire/ holds what client and node agree on: it imports protocol/ only.",
      ),
    },
  },
  {
    files: ["scripts/**/*.ts"],
    // gen-vectors writes the golden vectors that test/vectors/build-vectors.ts builds: a test-fixture tool.
    ignores: ["scripts/gen-vectors.ts"],
    rules: {
      "no-restricted-imports": forbid(["**/test/**"], "Scripts are shipped tools: they never import tests."),
    },
  },
);
