/**
 * The relayer refuses bad input with a clear error and loses nothing: settings, the network file, the signer
 * key, start-up checks against live chains (wrong chain id, a bridge that is not a bridge, an unreachable RPC),
 * the CLI's exit code, and the operator API's ids, queries and authentication. On Hardhat node chains and on anvil
 * (CHAIN_KINDS).
 */
import { expect } from "chai";
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import hre from "hardhat";
import pino from "pino";
import { NodeKey } from "../../protocol/keys";
import { encodeNodeKeystore } from "../../protocol/keystore";
import { ValidationError } from "../../protocol/errors";
import { loadRelayerConfig, type RelayerConfig } from "../../relayer/config";
import { parseNetwork, type NetworkFileJson } from "../../wire/network";
import { signerAccount, startRelayer, type RunningRelayer } from "../../relayer/relayer";
import { freeTcpPort } from "../../scripts/chainProcess";
import { startChaosProxy } from "./chaosProxy";
import { CHAIN_KINDS } from "../../scripts/chainProcess";
import { HARDHAT_DEV_KEYS, startLocalNetwork, type LocalNetwork } from "../../scripts/network";

const ROOT = join(__dirname, "..", "..");
const KEY = HARDHAT_DEV_KEYS.relayer;

for (const chainKind of CHAIN_KINDS) describe(`relayer: bad input (2 ${chainKind} chains)`, function () {
  this.timeout(120_000);
  let dir: string;
  let network: LocalNetwork;
  let networkJson: NetworkFileJson;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "ats-relayer-bad-"));
    network = await startLocalNetwork({ hre, dir, meshNodes: 1, chainKind, nodeLogger: pino({ level: "silent" }) });
    networkJson = JSON.parse(readFileSync(network.networkFile, "utf8")) as NetworkFileJson;
  });

  after(async () => {
    await network?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function writeNetwork(name: string, json: unknown): string {
    const file = join(dir, name);
    writeFileSync(file, typeof json === "string" ? json : JSON.stringify(json));
    return file;
  }

  function config(overrides: Record<string, unknown>): RelayerConfig {
    return loadRelayerConfig({ env: {}, overrides: { networkFile: network.networkFile, signerPrivateKey: KEY, dataDir: join(dir, `data-${Math.random()}`), apiPort: 0, ...overrides } });
  }

  describe("settings", () => {
    it("requires the network file and exactly one signer source, naming the setting", () => {
      expect(() => loadRelayerConfig({ env: {}, overrides: { signerPrivateKey: KEY } })).to.throw(ValidationError, /networkFile.*required/);
      expect(() => loadRelayerConfig({ env: {}, overrides: { networkFile: "x.json" } })).to.throw(/exactly one of signerPrivateKey and signerKeystoreFile/);
      expect(() => loadRelayerConfig({ env: {}, overrides: { networkFile: "x.json", signerPrivateKey: KEY, signerKeystoreFile: "k.json" } })).to.throw(/exactly one/);
      expect(() => loadRelayerConfig({ env: {}, overrides: { networkFile: "x.json", signerKeystoreFile: "k.json" } })).to.throw(/signerKeystorePassword.*required/);
    });

    it("refuses a malformed key without echoing it", () => {
      const secret = "0xnot-a-key-but-secret";
      let message = "";
      try {
        loadRelayerConfig({ env: { ATS_RELAYER_PRIVATE_KEY: secret }, overrides: { networkFile: "x.json" } });
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message).to.match(/signerPrivateKey/);
      expect(message).to.not.include(secret);
    });

    it("refuses retryBaseMs above retryMaxMs", () => {
      expect(() => config({ retryBaseMs: 5_000, retryMaxMs: 1_000 })).to.throw(/retryBaseMs.*retryMaxMs/);
    });
  });

  describe("network file", () => {
    it("names the field of an unknown key, a bad address, a bad confirmation count", () => {
      const chain = networkJson.chains[0]!;
      expect(() => parseNetwork({ ...networkJson, extra: 1 }, "f")).to.throw(ValidationError, /network/);
      expect(() => parseNetwork({ ...networkJson, chains: [{ ...chain, oracle: "0x1234" }] }, "f")).to.throw(/chains\/0\/oracle/);
      expect(() => parseNetwork({ ...networkJson, chains: [{ ...chain, confirmations: 10_000 }] }, "f")).to.throw(/confirmations/);
      expect(() => parseNetwork({ ...networkJson, chains: [{ ...chain, typo: true }] }, "f")).to.throw(/chains\/0/);
    });

    it("refuses a chain listed twice", () => {
      const chain = networkJson.chains[0]!;
      expect(() => parseNetwork({ ...networkJson, chains: [chain, { ...chain, name: "again" }] }, "f")).to.throw(/chain id 31337 is listed twice/);
    });

    it("refuses a file that is not JSON, naming the file", async () => {
      const file = writeNetwork("broken.json", "{ not json");
      await expectStartupError(config({ networkFile: file }), /broken\.json is not JSON/);
    });
  });

  async function expectStartupError(values: RelayerConfig, pattern: RegExp): Promise<void> {
    let relayer: RunningRelayer | undefined;
    try {
      relayer = await startRelayer(values, { log: pino({ level: "silent" }) });
    } catch (error) {
      expect((error as Error).message).to.match(pattern);
      return;
    } finally {
      await relayer?.stop();
    }
    expect.fail(`started, but should have failed with ${pattern}`);
  }

  describe("start-up checks against live chains", () => {
    it("refuses an RPC URL that serves another chain id", async () => {
      const file = writeNetwork("wrong-id.json", { ...networkJson, chains: [{ ...networkJson.chains[0]!, chainId: 999 }] });
      await expectStartupError(config({ networkFile: file }), /serves chain id 31337, the network file says 999/);
    });

    it("refuses a bridge address that is not a bridge", async () => {
      const chain = networkJson.chains[0]!;
      const file = writeNetwork("not-bridge.json", { ...networkJson, chains: [{ ...chain, bridge: chain.oracle }] });
      await expectStartupError(config({ networkFile: file }), /is not a bridge/);
    });

    it("refuses an RPC that cannot read state at the safe block (pruned), naming the block", async () => {
      const proxy = await startChaosProxy(networkJson.chains[0]!.rpcUrl);
      try {
        proxy.inject({ method: "eth_getBalance", kind: "pruned-state", remaining: 1 });
        const file = writeNetwork("pruned.json", { ...networkJson, chains: [{ ...networkJson.chains[0]!, rpcUrl: proxy.url }] });
        await expectStartupError(config({ networkFile: file }), /cannot read state at the safe block \d+ \(head \d+, confirmations \d+\): .*missing trie node.*an RPC that keeps that much state/);
        expect(proxy.hits["pruned-state"]).to.equal(1);
      } finally {
        await proxy.close();
      }
    });

    it("refuses an unreachable chain, naming its URL", async () => {
      const port = await freeTcpPort();
      const file = writeNetwork("down.json", { ...networkJson, chains: [{ ...networkJson.chains[0]!, rpcUrl: `http://127.0.0.1:${port}` }] });
      await expectStartupError(config({ networkFile: file }), new RegExp(`no answer from http://127\\.0\\.0\\.1:${port}`));
    });

    it("the CLI exits 1 with the reason on stderr", () => {
      const file = writeNetwork("cli-wrong-id.json", { ...networkJson, chains: [{ ...networkJson.chains[0]!, chainId: 998 }] });
      const configFile = join(dir, "cli.json");
      writeFileSync(configFile, JSON.stringify({ networkFile: file, dataDir: join(dir, "cli-data"), apiPort: 0 }));
      const result = spawnSync(process.execPath, [join(ROOT, "bin", "ats-relayer.js"), "start", "--config", configFile], { env: { ...process.env, ATS_RELAYER_PRIVATE_KEY: KEY }, encoding: "utf8", timeout: 60_000 });
      expect(result.status).to.equal(1);
      expect(result.stderr).to.match(/ats-relayer: chain alpha: .* serves chain id 31337, the network file says 998/);
      expect(result.stderr).to.not.include(KEY.slice(2));
    });
  });

  describe("signer keystore", () => {
    it("decrypts a V3 keystore, and refuses a wrong password, a plain keystore and one others may read", () => {
      const file = join(dir, "signer.json");
      writeFileSync(file, encodeNodeKeystore(NodeKey.fromPrivateKey(KEY), { password: "right" }), { mode: 0o600 });
      chmodSync(file, 0o600);
      expect(signerAccount({ signerPrivateKey: "", signerKeystoreFile: file, signerKeystorePassword: "right" }).address).to.equal("0x70997970C51812dc3A010C7d01b50e0d17dc79C8");
      expect(() => signerAccount({ signerPrivateKey: "", signerKeystoreFile: file, signerKeystorePassword: "wrong" })).to.throw(/cannot be decrypted/);
      writeFileSync(file, encodeNodeKeystore(NodeKey.fromPrivateKey(KEY)));
      chmodSync(file, 0o600);
      expect(() => signerAccount({ signerPrivateKey: "", signerKeystoreFile: file, signerKeystorePassword: "right" })).to.throw(/not an encrypted \(V3\) keystore/);
      chmodSync(file, 0o644);
      expect(() => signerAccount({ signerPrivateKey: "", signerKeystoreFile: file, signerKeystorePassword: "right" })).to.throw(/mode is 644/);
    });
  });

  describe("operator API", () => {
    let relayer: RunningRelayer;
    const apiKey = "operator-secret-key-0001";

    before(async () => {
      relayer = await startRelayer(config({ apiKeys: [apiKey], pollIntervalMs: 100, pushHeartbeatMs: 0 }), { log: pino({ level: "silent" }) });
    });
    after(async () => relayer?.stop());

    async function call(method: string, path: string, key?: string): Promise<{ status: number; body: { error?: string; items?: unknown[] } }> {
      const response = await fetch(`${relayer.apiUrl}${path}`, { method, headers: key === undefined ? {} : { "x-api-key": key } });
      return { status: response.status, body: (await response.json()) as { error?: string } };
    }

    it("answers 400 for a bad filter, an unknown query field, a limit above 500 and a malformed id", async () => {
      expect((await call("GET", "/items?limit=abc")).status).to.equal(400);
      expect((await call("GET", "/items?status=lost")).status).to.equal(400);
      expect((await call("GET", "/items?sneaky=1")).status).to.equal(400);
      const tooMany = await call("GET", "/items?limit=501");
      expect(tooMany.status).to.equal(400);
      expect(tooMany.body.error).to.match(/at most 500/);
      expect((await call("GET", "/items/not-an-id")).status).to.equal(400);
      expect((await call("GET", "/items/message:1:0xabc")).status).to.equal(404);
    });

    it("guards retry, skip and push with the API key (401), and says what state an action needs (409)", async () => {
      expect((await call("POST", "/push/31337")).status).to.equal(401);
      expect((await call("POST", "/push/31337", "wrong")).status).to.equal(401);
      expect((await call("POST", "/push/999", apiKey)).status).to.equal(404);
      expect((await call("POST", "/push/31337", apiKey)).status).to.equal(202);
      const pushed = await (async () => {
        for (let i = 0; i < 100; i++) {
          const { body } = await call("GET", "/items?kind=push&status=done");
          if ((body.items ?? []).length > 0) return body.items![0] as { id: string; outcome: string };
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        throw new Error("the forced push did not finish");
      })();
      expect(pushed.id).to.match(/^push:31337:\d+:forced$/);
      expect(pushed.outcome).to.match(/^pushed in block/);
      expect((await call("POST", `/items/${pushed.id}/retry`)).status).to.equal(401);
      const refused = await call("POST", `/items/${pushed.id}/skip`, apiKey);
      expect(refused.status).to.equal(409);
      expect(refused.body.error).to.match(/is done; skip needs pending or dead/);
      expect((await call("POST", "/items/message:1:0xabc/retry", apiKey)).status).to.equal(404);
    });

    it("refuses every operator action (403) when no API key is configured", async () => {
      const open = await startRelayer(config({ pollIntervalMs: 100, pushHeartbeatMs: 0 }), { log: pino({ level: "silent" }) });
      try {
        const response = await fetch(`${open.apiUrl}/push/31337`, { method: "POST", headers: { "x-api-key": "anything" } });
        expect(response.status).to.equal(403);
        expect(((await fetch(`${open.apiUrl}/health`)).status)).to.equal(200);
      } finally {
        await open.stop();
      }
    });
  });
});

