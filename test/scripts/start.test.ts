/**
 * `npm start -- --once`, as CI runs it: scripts/start.ts as a child process with its defaults (a mesh of 4
 * attesting nodes, two chains, the relayer, the catalog), the whole tour, every program's endpoints on its own line,
 * a clean exit; everything it started is gone after, the network file says "stopped" and the manifest is removed.
 * (The catalog's services, fetched live, and `ats-node manifest verify` against them: test/scripts/processes.test.ts.)
 */
import { expect } from "chai";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseNetwork, type NetworkFileJson } from "../../wire/network";

const ROOT = join(__dirname, "..", "..");

function runStart(args: string[], timeoutMs: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["-r", "./bin/register-ts.js", "scripts/start.ts", ...args], {
      cwd: ROOT,
      env: { ...process.env, ATS_NETWORK_DIR: dir }, // never the .ats/ of a network the developer runs
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`npm start did not finish in ${timeoutMs} ms:\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

let dir: string;

describe("npm start -- --once (scripts/start.ts)", function () {
  this.timeout(240_000);
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "ats-start-"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("runs the local network with a 4-node mesh and the whole tour (a mesh proof refused by the sample vault, accepted by AttestedCheckpoint), writes the network file, and exits 0", async () => {
    const { code, stdout, stderr } = await runStart(["--once"], 200_000);
    expect(code, `stderr:\n${stderr.slice(-3_000)}`).to.equal(0);
    expect(stdout).to.include("a mesh of 4 attesting nodes, 2 chains, the relayer");
    expect(stdout).to.match(/alpha oracle verifyTimeProof: true/);
    expect(stdout).to.match(/\d node entries \(oracle nodeQuorum 3\)/);
    expect(stdout).to.match(/with accuracy \d+ ns \(a relayer's edit\): on-chain false, the node says unknown-node/);
    // The rule's name alone puzzles: the tour says the signatures no longer match the changed field, and why.
    expect(stdout).to.match(/why: the nodes signed accuracy \d+ ns; with \d+ ns their signatures no longer match, so each entry recovers to an address no one registered/);
    // The live mesh proof: the sample vault refuses it, explained with the tier it needs; docs/solidity.md's contract
    // (AttestedCheckpoint, software-mesh bound) accepts it.
    expect(stdout).to.include('TimeLockedVault withdraw(lock 0, proof): reverts "Insufficient accuracy"');
    expect(stdout).to.match(/why: refused with "Insufficient accuracy": the proof's signed bound is [\d,]+ ns and the contract accepts at most 100 ns; this contract needs a hardware-timestamped network .* tier AccuracyTiers\.HARDWARE_TIMESTAMPED_NS \(100 ns\)/);
    expect(stdout).to.match(/AttestedCheckpoint checkpoint\(subject, proof\): accepted, Checkpointed at \S+ within \d+ ns/);
    expect(stdout).to.match(/status Executed: executed by 0x70997970C51812dc3A010C7d01b50e0d17dc79C8/);
    expect(stdout).to.match(/beta bridge: delivered in block \d+/);
    expect(stdout).to.include("reverts with TimeBridgeAlreadyDelivered");
    for (const node of [1, 2, 3, 4]) expect(stdout).to.match(new RegExp(`node ${node} +ats-node \\(pid \\d+\\): rest http://127\\.0\\.0\\.1:\\d+ .*grpc 127\\.0\\.0\\.1:\\d+ +ntp ntp://127\\.0\\.0\\.1:\\d+`));
    expect(stdout).to.match(/gateway +ats-gateway \(pid \d+\): rpc http:\/\/127\.0\.0\.1:(\d+) +ws ws:\/\/127\.0\.0\.1:\1 +metrics http:\/\/127\.0\.0\.1:\1\/metrics/);
    // The catalog: each service on the line that names it, the release it serves (built now or reused), the explorer to open.
    const catalogLine = /catalog +ats-catalog \(pid \d+\): explorer (http:\/\/127\.0\.0\.1:\d+)\/explorer\/ +downloads \1\/releases +evidence \1\/ipfs\/ +faucet \1\/faucet/.exec(stdout);
    expect(catalogLine, stdout).to.not.equal(null);
    expect(stdout).to.match(/(building the network's release ats-node-\S+ in the background \(npm run release: [^)]+\)|the network's release ats-node-\S+: reused \([^)]+\))/);
    expect(stdout).to.match(/catalog: downloads serve release ats-node-\S+; the faucet pays from Hardhat account #3 on alpha \(a public test key: development only\)/);
    expect(stdout).to.include(`time explorer: open ${catalogLine![1]}/explorer/ in a browser`);
    // --once says the network was stopped; the network file says so too (the relayer refuses it), the manifest is gone.
    expect(stdout).to.include("The network was up and has been stopped (--once)");
    const networkFile = join(dir, "network.json");
    const file = JSON.parse(readFileSync(networkFile, "utf8")) as NetworkFileJson;
    expect(file.status).to.equal("stopped");
    expect(() => parseNetwork(file, networkFile)).to.throw("the network it describes has been stopped");
    const network = parseNetwork({ ...file, status: "running" }, networkFile);
    expect(network.chains.map((chain) => chain.chainId)).to.deep.equal([31337, 31338]);
    expect(network.nodes).to.have.length(4);
    expect(new Set(file.ntp).size, "one NTP time host per node").to.equal(4);
    expect(file.programs!.map((program) => program.name)).to.deep.equal(["chain alpha", "chain beta", "node 1", "node 2", "node 3", "node 4", "gateway", "relayer", "catalog"]);
    expect(existsSync(join(dir, "manifest.json"))).to.equal(false);
    // Everything it started is stopped: the chains and the catalog no longer answer.
    for (const url of [...network.chains.map((chain) => chain.rpcUrl), `${catalogLine![1]}/releases`]) {
      const answered = await fetch(url, { method: "POST", body: "{}", signal: AbortSignal.timeout(2_000) }).then(
        () => true,
        () => false,
      );
      expect(answered, url).to.equal(false);
    }
  });

  it("refuses a bad --nodes with exit code 2 and says why", async () => {
    const { code, stderr } = await runStart(["--once", "--nodes", "0"], 60_000);
    expect(code).to.equal(2);
    expect(stderr).to.include("--nodes must be an integer from 1 to 16, got 0");
  });
});
