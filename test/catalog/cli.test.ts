/** `ats-catalog`'s command line (catalog/cli.ts over lib/programCli.ts), in process with captured output. */
import { expect } from "chai";
import { readFileSync } from "node:fs";
import { main } from "../../catalog/cli";

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return { out, err, io: { stdout: (text: string) => out.push(text), stderr: (text: string) => err.push(text), untilStopped: async () => undefined } };
}

describe("catalog: ats-catalog command line", () => {
  it("prints its settings (table and JSON), its version and its usage; exit 2 on anything else", async () => {
    const table = capture();
    expect(await main(["settings"], table.io)).to.equal(0);
    expect(table.out.join("\n")).to.contain("ATS_CATALOG_FAUCET_PRIVATE_KEY").and.to.contain("(secret)");
    const json = capture();
    expect(await main(["settings", "--json"], json.io)).to.equal(0);
    expect((JSON.parse(json.out.join("")) as { name: string }[]).map((row) => row.name)).to.include.members(["releasesDir", "contentDir", "faucetRpcUrl"]);
    const version = capture();
    expect(await main(["--version"], version.io)).to.equal(0);
    expect(version.out).to.deep.equal([(JSON.parse(readFileSync("package.json", "utf8")) as { version: string }).version]);
    const bogus = capture();
    expect(await main(["bogus"], bogus.io)).to.equal(2);
    expect(bogus.err.join("\n")).to.contain("ats-catalog start [--config <file>]");
  });

  it("refuses to start with half a faucet (an RPC URL and no key), exit 1 naming the setting", async () => {
    const previous = process.env["ATS_CATALOG_FAUCET_RPC_URL"];
    process.env["ATS_CATALOG_FAUCET_RPC_URL"] = "http://127.0.0.1:1";
    try {
      const run = capture();
      expect(await main(["start"], run.io)).to.equal(1);
      expect(run.err.join("\n")).to.contain("faucetPrivateKey").and.to.contain("needs both faucetRpcUrl and faucetPrivateKey");
    } finally {
      if (previous === undefined) delete process.env["ATS_CATALOG_FAUCET_RPC_URL"];
      else process.env["ATS_CATALOG_FAUCET_RPC_URL"] = previous;
    }
  });
});
