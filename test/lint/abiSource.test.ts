/**
 * eslint.config.js keeps one ABI source: outside the generated abi/, a hand-written ABI (parseAbi, an ABI item
 * literal), a cast to `Abi` or a cast on a call's abi/functionName/args fails lint. Each rule is shown to fire on
 * a file placed in a program folder, and not in abi/ itself.
 */
import { expect } from "chai";
import { ESLint } from "eslint";
import { join } from "node:path";

const ROOT = join(__dirname, "..", "..");

async function messagesFor(code: string, file: string): Promise<string[]> {
  const [result] = await new ESLint({ cwd: ROOT }).lintText(code, { filePath: join(ROOT, file) });
  return result!.messages.map((message) => `${message.ruleId}: ${message.message}`);
}

describe("lint: one ABI source (abi/)", function () {
  this.timeout(60_000);
  const cases: [string, string, RegExp][] = [
    ["parseAbi", 'import { parseAbi } from "viem";\nexport const a = parseAbi(["function f()"]);\n', /parseAbi: contract ABIs come from the generated abi/],
    ["parseAbiItem", 'import { parseAbiItem } from "viem";\nexport const a = parseAbiItem("function f()");\n', /parseAbiItem: contract ABIs come from the generated abi/],
    ["an ABI item literal", 'export const a = [{ "type": "function", "name": "f", "inputs": [], "outputs": [] }];\n', /An ABI item literal/],
    ["a cast to Abi", 'import type { Abi } from "viem";\nexport const a = JSON.parse("[]") as Abi;\n', /`as Abi` switches off viem's checking/],
    ["a cast on args", 'export const call = { functionName: "f", args: [1] as never };\n', /A cast on a contract call's abi, functionName, args/],
  ];
  for (const [name, code, expected] of cases) {
    it(`rejects ${name} in relayer/`, async () => {
      const messages = await messagesFor(code, "relayer/lintProbe.ts");
      expect(messages.some((message) => message.startsWith("no-restricted-syntax") && expected.test(message)), messages.join("\n")).to.equal(true);
    });
  }

  it("accepts an ABI item literal in abi/ (the generated module)", async () => {
    expect(await messagesFor(cases[2]![1], "abi/lintProbe.ts")).to.deep.equal([]);
  });
});
