import { expect } from "chai";
import { execFile } from "node:child_process";
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { loadKeyDir } from "../../protocol/keystore";
import { runCli, type CliIo, type StartNodeFunction } from "../../node/cli";
import type { NodeConfig } from "../../node/config";
import { expectRejects, silentLogger, tempDir } from "./core/helpers";

const execFileAsync = promisify(execFile);
const BIN = join(__dirname, "..", "..", "bin", "ats-node.js");

function captureIo(overrides: Partial<CliIo> = {}): CliIo & { out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out,
    err,
    stdout: (line) => out.push(line),
    stderr: (line) => err.push(line),
    env: {},
    cwd: process.cwd(),
    logger: () => silentLogger(),
    ...overrides,
  };
}

describe("ats-node CLI", function () {
  this.timeout(60_000);
  const dir = tempDir("cli");
  after(() => dir.remove());

  it("keys init creates CA, card and node keys, prints only the public summary, and round-trips", async () => {
    const io = captureIo();
    const keyDir = join(dir.path, "keys");
    expect(await runCli(["keys", "init", keyDir], io)).to.equal(0);
    const printed = io.out.join("\n");
    const summary = JSON.parse(printed) as { cardId: string; nodeAddress: string; cardPublicKey: string };
    const loaded = await loadKeyDir(keyDir);
    expect(summary.cardId).to.equal(loaded.cardId);
    expect(summary.nodeAddress).to.equal(loaded.nodeAddress);
    expect(summary.cardPublicKey).to.equal(loaded.cardPublicKey);
    // No private material on stdout: neither PEM private keys nor the node scalar.
    expect(printed).not.to.contain("PRIVATE KEY");
    expect(printed.toLowerCase()).not.to.contain(loaded.nodeKey.exportPrivateKey().slice(2).toLowerCase());
    expect(readFileSync(join(keyDir, "card.key.pem"), "utf8")).to.contain("PRIVATE KEY");
    expect(statSync(join(keyDir, "node.json")).mode & 0o777).to.equal(0o600);
    // A second init refuses to overwrite the keys.
    const again = captureIo();
    expect(await runCli(["keys", "init", keyDir], again)).to.equal(1);
    expect(again.err.join("\n")).to.contain("--force");
  });

  it("keys init encrypts the node keystore when ATS_KEYSTORE_PASSWORD is set", async () => {
    const keyDir = join(dir.path, "encrypted");
    const io = captureIo({ env: { ATS_KEYSTORE_PASSWORD: "correct horse battery staple" } });
    expect(await runCli(["keys", "init", keyDir], io)).to.equal(0);
    expect(JSON.parse(io.out.join("\n"))).to.include({ nodeKeystoreEncrypted: true });
    expect(readFileSync(join(keyDir, "node.json"), "utf8")).not.to.contain("privateKey");
    await expectRejects(loadKeyDir(keyDir), Error);
    const loaded = await loadKeyDir(keyDir, { password: "correct horse battery staple" });
    expect(loaded.nodeAddress).to.match(/^0x[0-9a-fA-F]{40}$/);
  });

  it("start loads the config file, prints the endpoints and closes on the shutdown signal", async () => {
    const file = join(dir.path, "node.json");
    writeFileSync(file, JSON.stringify({ keyDir: "./keys", restPort: 0, grpcPort: 0, tickIntervalNs: "2000000" }));
    let seenConfig: NodeConfig | undefined;
    let closed = false;
    const startNode: StartNodeFunction = async ({ config }) => {
      seenConfig = config;
      return { endpoints: { rest: "http://127.0.0.1:1", grpc: "127.0.0.1:2", ws: "ws://127.0.0.1:1/v1/stream" }, close: async () => void (closed = true) };
    };
    const io = captureIo({ startNode, shutdownSignal: async () => "SIGTERM", env: { ATS_ACCURACY_NS: "40" } });
    expect(await runCli(["start", "--config", file], io)).to.equal(0);
    expect(JSON.parse(io.out.join("\n")).endpoints.rest).to.equal("http://127.0.0.1:1");
    expect(seenConfig?.keyDir).to.equal(join(dir.path, "keys"));
    expect(seenConfig?.tickIntervalNs).to.equal(2_000_000n);
    expect(seenConfig?.accuracyNs).to.equal(40); // env overrides the file
    expect(closed).to.equal(true);
  });

  it("start reports a bad setting in one line naming it, with exit code 1", async () => {
    const file = join(dir.path, "bad.json");
    writeFileSync(file, JSON.stringify({ tickIntervalNs: "10" }));
    const io = captureIo();
    expect(await runCli(["start", "--config", file], io)).to.equal(1);
    expect(io.err.join("\n")).to.contain("config.tickIntervalNs").and.to.contain("between 100000");
    expect(await runCli(["start"], captureIo())).to.equal(2);
  });

  it("dev starts a node with fresh keys on free ports and trusts the dev CA", async () => {
    let seenConfig: NodeConfig | undefined;
    const startNode: StartNodeFunction = async ({ config }) => {
      seenConfig = config;
      return { endpoints: { rest: "http://127.0.0.1:1", grpc: "", ws: "ws://127.0.0.1:1/v1/stream" }, close: async () => undefined };
    };
    const io = captureIo({ startNode, shutdownSignal: async () => "SIGINT" });
    expect(await runCli(["dev"], io)).to.equal(0);
    const printed = JSON.parse(io.out.join("\n")) as { cardId: string; keyDir: string };
    expect(printed.cardId).to.match(/^0x[0-9a-f]{64}$/);
    expect(seenConfig?.restPort).to.equal(0);
    expect(seenConfig?.grpcPort).to.equal(0);
    expect(seenConfig?.trustedRootsPem).to.have.length(1);
    expect(() => statSync(printed.keyDir)).to.throw(); // the temp folder is removed on shutdown
  });

  it("answers an unknown command with the usage and exit code 2", async () => {
    const io = captureIo();
    expect(await runCli(["bogus"], io)).to.equal(2);
    expect(io.err.join("\n")).to.contain("unknown command").and.to.contain("usage:");
    expect(await runCli(["keys", "init", "--nope", "x"], captureIo())).to.equal(2);
  });

  it("bin/ats-node.js runs the TypeScript CLI (prints the settings table)", async () => {
    const { stdout } = await execFileAsync(process.execPath, [BIN, "settings"]);
    const table = JSON.parse(stdout) as { name: string; env: string }[];
    expect(table.map((row) => row.name)).to.include.members(["host", "tickIntervalNs", "apiKeys", "maxRequestsPerSecond"]);
  });

  it("bin/register-ts.js loads the whole node without Node's domain module (it slows every EventEmitter)", async () => {
    const register = join(__dirname, "..", "..", "bin", "register-ts.js");
    const probe = `require(${JSON.stringify(join(__dirname, "..", "..", "node", "cli.ts"))});
      require(${JSON.stringify(join(__dirname, "..", "..", "node", "server.ts"))});
      process.stdout.write(JSON.stringify(process.moduleLoadList.filter((name) => /domain|repl/.test(name))));`;
    const { stdout } = await execFileAsync(process.execPath, ["-r", register, "-e", probe]);
    expect(JSON.parse(stdout)).to.deep.equal([]);
  });

  it("bin/register-ts.js reports a TypeScript syntax error with the file name", async () => {
    const dir = tempDir("register");
    try {
      const broken = join(dir.path, "broken.ts");
      writeFileSync(broken, "export const x: number = ;\n");
      const register = join(__dirname, "..", "..", "bin", "register-ts.js");
      const failure = await execFileAsync(process.execPath, ["-r", register, broken]).then(
        () => undefined,
        (error: unknown) => error as { code: number; stderr: string },
      );
      expect(failure?.code).to.equal(1);
      expect(failure?.stderr).to.contain("broken.ts").and.to.contain("Expression expected");
    } finally {
      dir.remove();
    }
  });
});
