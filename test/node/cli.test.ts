import { expect } from "chai";
import { execFile } from "node:child_process";
import { createPublicKey, X509Certificate } from "node:crypto";
import { copyFileSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo, type Server } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { cardIdFromPublicKey } from "../../protocol/codec";
import { MAX_SIGNING_DELAY_NS } from "../../protocol/constants";
import { DEV_CARD_PRIVATE_KEY, DEV_NODE_PRIVATE_KEYS } from "../../protocol/devkeys";
import { contradictionEvidence, findContradictions, MAX_CONTRADICTION_EVIDENCE_BYTES } from "../../protocol/evidence";
import { proofToJson } from "../../protocol/json";
import { nodeAddressFromPrivateKey } from "../../protocol/keys";
import { attest } from "../../protocol/sign";
import type { TimeProof } from "../../protocol/types";
import { loadKeyDir } from "../../protocol/keystore";
import { devRegistrations } from "../../deploy";
import { runCli, type CliIo } from "../../node/cli";
import type { StartNodeFunction } from "../../node/devNode";
import { describeSettings, type NodeConfig } from "../../node/config";
import { formatLogLine } from "../../lib/logFormat";
import { expectRejects, silentLogger, tempDir } from "./core/helpers";

const execFileAsync = promisify(execFile);

/** The card id and node addresses scripts/deploy.ts registers by default on a local chain. */
function deployedDevRegistrations(): { cardId: string; nodeAddresses: string[] } {
  const { cards, nodes } = devRegistrations();
  return { cardId: cardIdFromPublicKey(cards[0]!.publicKey), nodeAddresses: nodes.map((node) => node.address) };
}
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

/** A TCP server holding a free port on 127.0.0.1 (another process's server, as far as the node can tell). */
async function holdPort(): Promise<{ port: number; release(): Promise<void> }> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    release: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Runs bin/ats-node.js; resolves with the exit code and output (a non-zero exit is not a rejection). */
async function runBin(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await execFileAsync(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, timeout: 30_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failure = error as { code: number; stdout: string; stderr: string };
    return { code: failure.code, stdout: failure.stdout, stderr: failure.stderr };
  }
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

  it("dev starts a node on the public development keys deploy.ts registers, on free ports, trusting the dev CA; --fresh-keys makes new ones", async () => {
    let seenConfig: NodeConfig | undefined;
    const startNode: StartNodeFunction = async ({ config }) => {
      seenConfig = config;
      return { endpoints: { rest: "http://127.0.0.1:1", grpc: "", ws: "ws://127.0.0.1:1/v1/stream" }, close: async () => undefined };
    };
    const io = captureIo({ startNode, shutdownSignal: async () => "SIGINT" });
    expect(await runCli(["dev"], io)).to.equal(0);
    const printed = JSON.parse(io.out.join("\n")) as { cardId: string; keyDir: string; nodeAddress: string };
    // What scripts/deploy.ts registers on a local chain (DEV_CARD_PRIVATE_KEY, DEV_NODE_PRIVATE_KEYS).
    const registered = deployedDevRegistrations();
    expect(printed.cardId).to.equal(registered.cardId);
    expect(registered.nodeAddresses).to.include(printed.nodeAddress);
    expect(seenConfig?.restPort).to.equal(0);
    expect(seenConfig?.grpcPort).to.equal(0);
    expect(seenConfig?.trustedRootsPem).to.have.length(1);
    expect(() => statSync(printed.keyDir)).to.throw(); // the temp folder is removed on shutdown

    const fresh = captureIo({ startNode, shutdownSignal: async () => "SIGINT" });
    expect(await runCli(["dev", "--fresh-keys"], fresh)).to.equal(0);
    const freshPrinted = JSON.parse(fresh.out.join("\n")) as { cardId: string; nodeAddress: string };
    expect(freshPrinted.cardId).to.match(/^0x[0-9a-f]{64}$/).and.not.equal(registered.cardId);
    expect(registered.nodeAddresses).to.not.include(freshPrinted.nodeAddress);
  });

  it("cluster starts N real meshed nodes on 127.0.0.1, prints them, and a bad --nodes is one line with exit code 1", async () => {
    let printed: { nodes: Array<{ nodeId: string; endpoints: { rest: string; mesh: string } }> } | undefined;
    let servedConsensus: { members: number; responders: number } | undefined;
    // The shutdown signal comes once a node has served a co-signed proof: the real nodes, meshed, on loopback.
    const io: CliIo & { out: string[]; err: string[] } = captureIo({
      shutdownSignal: async () => {
        printed = JSON.parse(io.out.join("\n")) as typeof printed;
        const rest = printed!.nodes[0]!.endpoints.rest;
        for (let attempt = 0; attempt < 200 && servedConsensus === undefined; attempt += 1) {
          const response = await fetch(`${rest}/time/current`);
          if (response.status === 200) servedConsensus = ((await response.json()) as { consensus: { members: number; responders: number } }).consensus;
          else await new Promise((resolve) => setTimeout(resolve, 50));
        }
        return "SIGINT";
      },
    });
    expect(await runCli(["cluster", "--nodes", "3"], io)).to.equal(0);
    expect(printed!.nodes).to.have.length(3);
    for (const node of printed!.nodes) {
      expect(node.nodeId).to.match(/^0x[0-9a-fA-F]{40}$/);
      expect(node.endpoints.rest).to.match(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(node.endpoints.mesh).to.match(/^udp:\/\/127\.0\.0\.1:\d+$/);
    }
    expect(servedConsensus?.members).to.equal(3);
    expect(servedConsensus?.responders).to.be.at.least(2);
    const bad = captureIo({ shutdownSignal: async () => "SIGINT" });
    expect(await runCli(["cluster", "--nodes", "0"], bad)).to.equal(1);
    expect(bad.err.join("\n")).to.contain("--nodes: must be an integer from 1 to 32");
  });

  it("answers an unknown command with the usage and exit code 2", async () => {
    const io = captureIo();
    expect(await runCli(["bogus"], io)).to.equal(2);
    expect(io.err.join("\n")).to.contain("unknown command").and.to.contain("usage:");
    expect(await runCli(["keys", "init", "--nope", "x"], captureIo())).to.equal(2);
  });

  it("evidence check: exit 0 for a proven contradiction, 1 for evidence that proves none, 2 for malformed input", async () => {
    // Dev node 0 signs one moment, then, an hour later by its own clock, a moment more than the signing delay before it.
    const signed = (nanoMoment: bigint, nodeTimestampNs: bigint) =>
      attest({ card: DEV_CARD_PRIVATE_KEY, nodes: [DEV_NODE_PRIVATE_KEYS[0]], nanoMoment, accuracy: 50, nodeTimestampNs });
    const momentNs = 1_732_268_493_123_456_789n;
    const hourNs = 3_600_000_000_000n;
    const write = (name: string, content: string) => {
      const file = join(dir.path, name);
      writeFileSync(file, content);
      return file;
    };
    const evidenceFile = (earlier: TimeProof, later: TimeProof) => {
      const [found] = findContradictions(earlier, later);
      const document = found === undefined
        ? { kind: "ats-contradiction", version: 1, nodeId: nodeAddressFromPrivateKey(DEV_NODE_PRIVATE_KEYS[0]), proofs: [earlier, later].map((proof) => ({ entryIndex: 0, timeProof: proofToJson(proof) })) }
        : contradictionEvidence(found, [earlier, later]);
      return JSON.stringify(document, null, 2);
    };
    const first = signed(momentNs, momentNs);
    const lying = write("lie.json", evidenceFile(first, signed(momentNs - MAX_SIGNING_DELAY_NS - hourNs, momentNs + hourNs)));
    const honest = write("honest.json", evidenceFile(first, signed(momentNs - MAX_SIGNING_DELAY_NS, momentNs + hourNs)));
    const node = nodeAddressFromPrivateKey(DEV_NODE_PRIVATE_KEYS[0]);

    const proven = captureIo();
    expect(await runCli(["evidence", "check", lying], proven)).to.equal(0);
    expect(proven.out.join("\n")).to.contain(`node ${node} signed contradicting entries`);
    const provenJson = captureIo();
    expect(await runCli(["evidence", "check", "--json", lying], provenJson)).to.equal(0);
    expect(JSON.parse(provenJson.out.join("\n"))).to.deep.include({ valid: true, nodeId: node });

    const notProven = captureIo();
    expect(await runCli(["evidence", "check", honest, "--json"], notProven)).to.equal(1);
    expect(JSON.parse(notProven.out.join("\n"))).to.deep.include({ valid: false, reason: "not-contradictory", nodeId: node });
    const notProvenText = captureIo();
    expect(await runCli(["evidence", "check", honest], notProvenText)).to.equal(1);
    expect(notProvenText.out.join("\n")).to.contain("NOT evidence (not-contradictory)");

    for (const [file, why] of [
      [write("broken.json", "{ not json"), "malformed JSON"],
      [write("large.json", " ".repeat(MAX_CONTRADICTION_EVIDENCE_BYTES + 1)), `larger than ${MAX_CONTRADICTION_EVIDENCE_BYTES} bytes`],
      [join(dir.path, "missing.json"), "cannot read it"],
    ] as const) {
      const io = captureIo();
      expect(await runCli(["evidence", "check", file, "--json"], io), why).to.equal(2);
      const verdict = JSON.parse(io.out.join("\n")) as { reason: string; detail: string };
      expect(verdict.reason, why).to.equal("malformed");
      expect(verdict.detail, why).to.contain(why);
    }
    const usage = captureIo();
    expect(await runCli(["evidence", "check"], usage)).to.equal(2);
    expect(usage.err.join("\n")).to.contain("usage: ats-node evidence check <file | http(s)://…/ipfs/<cid>>");
  });

  it("bin/ats-node.js runs the built CLI, dist/node/cli.js (prints the settings table as JSON with --json)", async () => {
    const { stdout } = await execFileAsync(process.execPath, [BIN, "settings", "--json"]);
    const table = JSON.parse(stdout) as { name: string; env: string }[];
    expect(table.map((row) => row.name)).to.include.members(["host", "tickIntervalNs", "apiKeys", "maxRequestsPerSecond"]);
  });

  it("settings prints a readable table (setting, env, default, short description); --json keeps the full JSON", async () => {
    const io = captureIo();
    expect(await runCli(["settings"], io)).to.equal(0);
    const text = io.out.join("\n");
    const lines = text.split("\n");
    expect(lines[0]).to.match(/^SETTING +ENV +DEFAULT +DESCRIPTION$/);
    expect(lines.find((line) => line.startsWith("restPort "))).to.match(/^restPort +ATS_REST_PORT +8080 +REST \+ WebSocket \+ \/metrics port\.$/);
    expect(lines.find((line) => line.startsWith("maxRequestsPerSecond "))).to.contain("ATS_MAX_REQUESTS_PER_SECOND, MAX_REQUESTS_PER_SECOND");
    expect(() => JSON.parse(text)).to.throw(); // not JSON
    // Readable: one short line per setting (the description is cut to its first sentence, at most 64 characters).
    expect(lines.length).to.be.at.least(describeSettings().length + 1);
    for (const line of lines) expect(line.length, line).to.be.at.most(200);
    const json = captureIo();
    expect(await runCli(["settings", "--json"], json)).to.equal(0);
    const rows = JSON.parse(json.out.join("\n")) as { name: string; bounds: string | null }[];
    expect(rows.find((row) => row.name === "restPort")?.bounds).to.equal("0..65535");
  });

  it("settings --config adds the values from the file and the environment, secrets redacted", async () => {
    const file = join(dir.path, "settings.json");
    writeFileSync(file, JSON.stringify({ restPort: 9123, dataDir: "./state" }));
    const apiKey = "operator-secret-api-key-0123456789";
    const password = "operator-keystore-password";
    const io = captureIo({ env: { ATS_API_KEYS: apiKey, ATS_KEYSTORE_PASSWORD: password, ATS_GRPC_PORT: "9124" } });
    expect(await runCli(["settings", "--config", file], io)).to.equal(0);
    const text = io.out.join("\n");
    const lines = text.split("\n");
    expect(lines[0]).to.match(/^SETTING +ENV +DEFAULT +VALUE +DESCRIPTION$/);
    expect(lines.find((line) => line.startsWith("restPort "))).to.match(/ 8080 +9123 /);
    expect(lines.find((line) => line.startsWith("grpcPort "))).to.match(/ 50051 +9124 /);
    expect(lines.find((line) => line.startsWith("dataDir "))).to.contain(join(dir.path, "state"));
    expect(lines.find((line) => line.startsWith("apiKeys "))).to.contain("[redacted: 1 entries]");
    expect(lines.find((line) => line.startsWith("keystorePassword "))).to.contain("[redacted]");
    const json = captureIo({ env: io.env });
    expect(await runCli(["settings", "--config", file, "--json"], json)).to.equal(0);
    expect(JSON.parse(json.out.join("\n")).find((row: { name: string }) => row.name === "restPort").value).to.equal(9123);
    for (const output of [text, json.out.join("\n")]) {
      expect(output).not.to.contain(apiKey);
      expect(output).not.to.contain(password);
    }
  });

  it("--version prints the package version and the protocol version", async () => {
    const { version } = JSON.parse(readFileSync(join(__dirname, "..", "..", "package.json"), "utf8")) as { version: string };
    const io = captureIo();
    expect(await runCli(["--version"], io)).to.equal(0);
    expect(io.out).to.deep.equal([`ats-node ${version} (protocol ATS/1)`]);
    const bin = await runBin(["--version"]);
    expect(bin).to.include({ code: 0, stdout: `ats-node ${version} (protocol ATS/1)\n` });
  });

  it("keys init leaves no CA private key in the key folder, and loading the folder (what the node reads at start) needs none", async () => {
    const keyDir = join(dir.path, "no-ca-key");
    const io = captureIo();
    expect(await runCli(["keys", "init", keyDir], io)).to.equal(0);
    expect(readdirSync(keyDir).sort()).to.deep.equal(["ca.pem", "card.key.pem", "card.pem", "node.json"]);
    expect(JSON.parse(io.out.join("\n")).files).to.not.include("ca.key.pem");
    expect(io.err.join("\n")).to.contain("private key was not kept");
    // The only private key in PEM form is the card's, not the CA's.
    const caPublicKey = new X509Certificate(readFileSync(join(keyDir, "ca.pem"))).publicKey.export({ format: "der", type: "spki" });
    for (const name of readdirSync(keyDir)) {
      const text = readFileSync(join(keyDir, name), "utf8");
      if (!text.includes("PRIVATE KEY")) continue;
      expect(name).to.equal("card.key.pem");
      expect(createPublicKey(text).export({ format: "der", type: "spki" }).equals(caPublicKey)).to.equal(false);
    }
    const loaded = await loadKeyDir(keyDir); // what the node reads at start
    expect(loaded.ca?.certificatePem).to.contain("BEGIN CERTIFICATE");
  });

  it("docs/node.md's sample config (examples/node.config.json) starts a node next to `keys init ./keys`", async () => {
    const folder = join(dir.path, "sample");
    expect(await runCli(["keys", "init", join(folder, "keys")], captureIo())).to.equal(0);
    copyFileSync(join(__dirname, "..", "..", "examples", "node.config.json"), join(folder, "node.config.json"));
    let health: number | undefined;
    const io = captureIo({
      cwd: dir.path, // not the file's folder: keyDir and dataDir still resolve next to the file
      env: { ATS_REST_PORT: "0", ATS_GRPC_PORT: "0" },
      shutdownSignal: async () => {
        const { endpoints } = JSON.parse(io.out.join("\n")) as { endpoints: { rest: string } };
        health = (await fetch(`${endpoints.rest}/health`)).status;
        return "SIGTERM";
      },
    });
    expect(await runCli(["start", "--config", join(folder, "node.config.json")], io)).to.equal(0);
    expect(health).to.equal(200);
    expect(statSync(join(folder, "data")).isDirectory()).to.equal(true); // dataDir "./data" next to the file
  });

  it("names a busy restPort or grpcPort in one line, without a stack, with a non-zero exit code", async () => {
    const held = await holdPort();
    try {
      const rest = captureIo({ env: { ATS_REST_PORT: String(held.port) } });
      expect(await runCli(["dev"], rest)).to.equal(1);
      expect(rest.err).to.deep.equal([`ats-node: restPort ${held.port} is already in use on 127.0.0.1 (set ATS_REST_PORT or restPort)`]);
      const grpc = captureIo({ env: { ATS_GRPC_PORT: String(held.port) } });
      expect(await runCli(["dev"], grpc)).to.equal(1);
      expect(grpc.err).to.deep.equal([`ats-node: grpcPort ${held.port} is already in use on 127.0.0.1 (set ATS_GRPC_PORT or grpcPort)`]);
      // The real process: exit code 1 and that line, no "unexpected error", no stack trace.
      const bin = await runBin(["dev"], { ATS_REST_PORT: String(held.port), ATS_LOG_LEVEL: "warn" });
      expect(bin.code).to.equal(1);
      expect(bin.stderr).to.contain(`ats-node: restPort ${held.port} is already in use on 127.0.0.1 (set ATS_REST_PORT or restPort)`);
      expect(bin.stderr).not.to.contain("unexpected error");
      expect(bin.stderr).not.to.match(/\n\s+at /);
    } finally {
      await held.release();
    }
  });

  it("writes readable log lines with --pretty or ATS_LOG_FORMAT=pretty (JSON lines otherwise)", async () => {
    const startNode: StartNodeFunction = async ({ logger }) => {
      logger.info({ endpoints: { rest: "http://127.0.0.1:1" }, authRequired: false }, "node listening");
      logger.error({ err: new Error("boom") }, "push failed");
      return { endpoints: { rest: "http://127.0.0.1:1", grpc: "", ws: "ws://127.0.0.1:1/v1/stream" }, close: async () => undefined };
    };
    const file = join(dir.path, "pretty.json");
    writeFileSync(file, JSON.stringify({ keyDir: "./keys", restPort: 0, grpcPort: 0 }));
    for (const [args, env] of [
      [["start", "--config", file, "--pretty"], {}],
      [["start", "--config", file], { ATS_LOG_FORMAT: "pretty" }],
      [["dev", "--pretty"], {}],
    ] as const) {
      const io = captureIo({ startNode, shutdownSignal: async () => "SIGTERM", env: { ...env } });
      delete io.logger; // the CLI's own logger
      expect(await runCli([...args], io), args.join(" ")).to.equal(0);
      const listening = io.err.find((line) => line.includes("node listening"));
      expect(listening, args.join(" ")).to.match(/^\d\d:\d\d:\d\d\.\d{3} INFO {2}node listening endpoints=\{"rest":"http:\/\/127\.0\.0\.1:1"\} authRequired=false$/);
      const failure = io.err.find((line) => line.includes("push failed"));
      expect(failure).to.match(/^\d\d:\d\d:\d\d\.\d{3} ERROR push failed\n {4}Error: boom\n {8}at /);
    }
    expect(formatLogLine('{"level":40,"time":0,"msg":"slow","ms":12,"route":"/time/current"}')).to.match(/^\d\d:\d\d:\d\d\.000 WARN {2}slow ms=12 route=\/time\/current$/);
    expect(formatLogLine("not json")).to.equal("not json");
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

  it("the bins stop with the install command when node-operator packages are missing (a dApp install leaves them out)", async () => {
    const helper = join(__dirname, "..", "..", "bin", "operatorPackages.js");
    // A resolver that finds everything but two of the packages, as in a project that installed only the dApp part.
    const script = `require(${JSON.stringify(helper)}).requireOperatorPackages("ats-node", (name) => { if (name === "fastify" || name === "pino") throw new Error("missing"); return name; }); console.log("went on");`;
    const failure = await execFileAsync(process.execPath, ["-e", script]).then(
      () => undefined,
      (error: unknown) => error as { code: number; stderr: string; stdout: string },
    );
    expect(failure?.code).to.equal(1);
    expect(failure?.stdout).to.equal("");
    expect(failure?.stderr).to.equal("ats-node: needs fastify, pino (node-operator packages a dApp install leaves out): npm install fastify pino\n");
    const present = await execFileAsync(process.execPath, ["-e", `require(${JSON.stringify(helper)}).requireOperatorPackages("ats-node"); console.log("went on");`]);
    expect(present.stdout).to.equal("went on\n");
  });
});
