/**
 * `npm start` runs every program as a process of its own (issue 31.2): scripts/start.ts as a child, left running;
 * its network file names each process and its endpoints.
 *
 * - One mesh member is killed (SIGKILL, a crash): the others keep serving proofs with consensus, co-signed by the
 *   survivors only, and report the dead member absent. Then `npm start` itself is SIGKILLed: every process it
 *   started, the chains and their supervisors included, stops on its own (bin/stopWithParent.js,
 *   scripts/superviseWithParent.js).
 * - On anvil with one node (`npm start -- --chain anvil`): the tour passes (a proof verified on-chain, pushed, a call
 *   executed, a message bridged); then, with only the endpoints of its network file, a proof the relayer pushes on
 *   request is read and verified on alpha through the gateway, whose consensus time is past it; Ctrl-C (SIGINT)
 *   stops every process, marks the network file stopped and removes the manifest.
 *
 * Processes are found in /proc (Linux): every descendant of the start process, by parent pid.
 */
import { expect } from "chai";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createPublicClient, http, type Hex } from "viem";
import { timeOracleAbi } from "../../abi";
import type { NetworkFileJson } from "../../wire/network";
import { LOCAL_RELAYER_API_KEY } from "../../scripts/network";
import { parseManifest } from "../../wire/manifest";

const ROOT = join(__dirname, "..", "..");

/** The fields of /proc/<pid>/stat after the command's name ("state ppid …"), or undefined once it is gone. */
function statFields(pid: number | string): string[] | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // "pid (comm) state ppid …": comm may hold spaces and parentheses, so the fields are read after the last ")".
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
}

/** Whether `pid` runs: a zombie (exited, not yet reaped by whoever adopted it) does not. */
function alive(pid: number): boolean {
  const fields = statFields(pid);
  return fields !== undefined && fields[0] !== "Z";
}

/** Every process now running below `rootPid` (children, their children…), read from /proc. */
function descendants(rootPid: number): number[] {
  const childrenOf = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const fields = statFields(entry);
    if (fields === undefined) continue; // it exited meanwhile
    const parentPid = Number(fields[1]);
    childrenOf.set(parentPid, [...(childrenOf.get(parentPid) ?? []), Number(entry)]);
  }
  const found: number[] = [];
  const pending = [rootPid];
  while (pending.length > 0) {
    for (const child of childrenOf.get(pending.pop()!) ?? []) {
      found.push(child);
      pending.push(child);
    }
  }
  return found;
}

async function until<T>(read: () => Promise<T | undefined> | T | undefined, what: string, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** `npm start` with `args`, left running in a folder of its own; `started()` resolves once it serves. */
class RunningStart {
  readonly dir = mkdtempSync(join(tmpdir(), "ats-processes-"));
  readonly child: ChildProcess;
  stdout = "";
  stderr = "";

  constructor(args: readonly string[]) {
    this.child = spawn(process.execPath, ["-r", "./bin/register-ts.js", "scripts/start.ts", ...args], {
      cwd: ROOT,
      env: { ...process.env, ATS_NETWORK_DIR: this.dir },
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.child.stdout!.on("data", (chunk: Buffer) => (this.stdout += chunk.toString()));
    this.child.stderr!.on("data", (chunk: Buffer) => (this.stderr = (this.stderr + chunk.toString()).slice(-20_000)));
  }

  exited(): boolean {
    return this.child.exitCode !== null || this.child.signalCode !== null;
  }

  async started(): Promise<NetworkFileJson> {
    await until(() => (this.stdout.includes("Press Ctrl-C to stop.") ? true : this.exited() ? Promise.reject(new Error(`npm start exited:\n${this.stdout}\n${this.stderr}`)) : undefined), "the network", 400_000);
    return JSON.parse(readFileSync(join(this.dir, "network.json"), "utf8")) as NetworkFileJson;
  }

  /** Sends `signal` and waits for the exit; returns the exit code. */
  async stop(signal: NodeJS.Signals): Promise<number | null> {
    if (this.exited()) return this.child.exitCode;
    const exited = new Promise<number | null>((resolve) => this.child.once("exit", (code) => resolve(code)));
    this.child.kill(signal);
    return exited;
  }

  /** SIGKILLed if still running (its children notice and stop on their own); its folder removed. */
  async cleanUp(): Promise<void> {
    await this.stop("SIGKILL");
    rmSync(this.dir, { recursive: true, force: true });
  }
}

describe("npm start: every program a process of its own (scripts/start.ts)", function () {
  this.timeout(600_000);
  let start: RunningStart | undefined;

  afterEach(async () => {
    await start?.cleanUp();
    start = undefined;
  });

  it("keeps serving proofs with consensus after one member's process is killed and reports it absent; a SIGKILLed npm start leaves no process behind", async () => {
    start = new RunningStart([]);
    const network = await start.started();
    const { stdout, dir } = start;
    expect(network.status).to.equal("running");
    const programs = network.programs!;
    expect(programs.map((program) => program.name)).to.deep.equal(["chain alpha", "chain beta", "node 1", "node 2", "node 3", "node 4", "gateway", "relayer"]);
    expect(new Set(programs.map((program) => program.pid)).size, "one process each").to.equal(programs.length);
    for (const program of programs) expect(stdout, program.name).to.include(`${program.program} (pid ${program.pid}):`);
    const nodes = programs.filter((program) => program.program === "ats-node");
    for (const node of nodes) expect(Object.keys(node.endpoints)).to.include.members(["rest", "metrics", "ws", "grpc", "ntp", "mesh"]);
    const manifest = parseManifest(JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")));
    expect(manifest.chain.evmChainId).to.equal(31337);
    expect(manifest.chain.ntsVerified).to.equal(false);
    expect(manifest.meshPeers).to.have.length(4);
    const gateway = programs.find((program) => program.name === "gateway")!;
    expect(manifest.services.time).to.equal(gateway.endpoints.rpc);
    expect(manifest.services["time-ws"]).to.equal(gateway.endpoints.ws);
    expect(manifest.services["time-host"]).to.equal(nodes[0]!.endpoints.ntp);
    expect(manifest.services["node-1-grpc"]).to.equal(`http://${nodes[0]!.endpoints.grpc}`);
    expect(manifest.services["node-4-ws"]).to.equal(nodes[3]!.endpoints.ws);

    // A crash of node 2's process.
    const victim = nodes[1]!;
    const victimId = manifest.meshPeers.find((peer) => peer.endpoint === victim.endpoints.rest)!.nodeId;
    process.kill(victim.pid, "SIGKILL");
    await until(() => (alive(victim.pid) ? undefined : true), "node 2's death", 10_000);

    // Node 1 reports it absent, and the three others keep serving co-signed proofs without it.
    const rest = nodes[0]!.endpoints.rest;
    await until(async () => {
      const state = (await (await fetch(`${rest}/mesh/state`)).json()) as { peers: { nodeId: string; absent: boolean }[] };
      return state.peers.find((peer) => peer.nodeId === victimId)?.absent === true ? true : undefined;
    }, "node 2 reported absent", 60_000);
    const survivors = manifest.meshPeers.filter((peer) => peer.nodeId !== victimId).map((peer) => peer.nodeId.toLowerCase());
    const served = await until(async () => {
      const response = await fetch(`${rest}/time/current`);
      if (response.status !== 200) return undefined;
      return (await response.json()) as { consensus: { members: number; responders: number; readings: { nodeId: string }[] } };
    }, "a proof after the crash", 60_000);
    expect(served.consensus.members).to.equal(4);
    expect(served.consensus.responders).to.be.at.least(3);
    for (const reading of served.consensus.readings) expect(survivors).to.include(reading.nodeId.toLowerCase());

    // npm start dies (SIGKILL): every process below it, the chains' included, stops on its own.
    const tree = descendants(start.child.pid!);
    for (const program of programs.filter((program) => program !== victim)) expect(tree, `${program.name} runs below npm start`).to.include(program.pid);
    for (const chain of programs.filter((program) => program.name.startsWith("chain "))) expect(descendants(chain.pid), `${chain.name} runs under its supervisor`).to.have.length(1);
    await start.stop("SIGKILL");
    const left = await until(() => {
      const running = tree.filter(alive);
      return running.length === 0 ? running : undefined;
    }, `the end of every process npm start started (${tree.join(", ")})`, 30_000).catch(() => tree.filter(alive));
    expect(left, "processes left running after npm start was SIGKILLed").to.deep.equal([]);
  });

  it("on anvil: the tour passes, a proof pushed by the relayer verifies through the gateway (endpoints from the network file), and Ctrl-C stops every process, marks the network file stopped and removes the manifest", async () => {
    start = new RunningStart(["--nodes", "1", "--chain", "anvil"]);
    const network = await start.started();
    expect(network.programs!.map((program) => `${program.name}: ${program.program}`)).to.deep.equal(["chain alpha: anvil", "chain beta: anvil", "node 1: ats-node", "gateway: ats-gateway", "relayer: ats-relayer"]);
    // The tour, as on Hardhat (test/scripts/start.test.ts): a proof verified on-chain, a call executed, a message bridged.
    expect(start.stdout).to.match(/alpha oracle verifyTimeProof: true/);
    expect(start.stdout).to.match(/status Executed: executed by 0x/);
    expect(start.stdout).to.match(/beta bridge: delivered in block \d+/);

    // From the network file alone: the relayer pushes a fresh proof to alpha on request…
    const endpoint = (name: string, key: string): string => network.programs!.find((program) => program.name === name)!.endpoints[key]!;
    const alpha = network.chains[0]!;
    const askedNs = BigInt(Date.now()) * 1_000_000n;
    const asked = await fetch(`${endpoint("relayer", "api")}/push/${alpha.chainId}`, { method: "POST", headers: { "x-api-key": LOCAL_RELAYER_API_KEY } });
    expect(asked.status).to.equal(202);
    const pushed = await until(async () => {
      const { items } = (await (await fetch(`${endpoint("relayer", "api")}/items?kind=push&chainId=${alpha.chainId}&limit=500`)).json()) as { items: { id: string; status: string; outcome: string | null }[] };
      const forced = items.find((item) => item.id.endsWith(":forced"));
      return forced !== undefined && forced.status !== "pending" && forced.status !== "submitted" ? forced : undefined;
    }, "the forced push", 60_000);
    expect(pushed.status, String(pushed.outcome)).to.equal("done");
    expect(pushed.outcome).to.match(/^pushed in block \d+ by 0x[0-9a-f]{64}$/);
    // …and alpha's oracle, read through the gateway (its eth_call goes to anvil), holds it and verifies it.
    const gateway = createPublicClient({ transport: http(endpoint("gateway", "rpc")) });
    const stored = await gateway.readContract({ address: alpha.oracle as Hex, abi: timeOracleAbi, functionName: "getCurrentTime" });
    expect(stored.nanoMoment >= askedNs - 2_000_000_000n, `a proof of the push's time, not the tour's (${stored.nanoMoment} vs asked at ${askedNs})`).to.equal(true);
    expect(await gateway.readContract({ address: alpha.oracle as Hex, abi: timeOracleAbi, functionName: "verifyTimeProof", args: [stored] })).to.equal(true);
    const answer = await fetch(endpoint("gateway", "rpc"), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "temporal_getConsensusTime" }) });
    const consensus = ((await answer.json()) as { result: { consensusTimeNs: string } }).result;
    expect(BigInt(consensus.consensusTimeNs) >= stored.nanoMoment, "the gateway's consensus time is past the stored proof").to.equal(true);

    const tree = descendants(start.child.pid!);
    expect(await start.stop("SIGINT"), start.stderr.slice(-3_000)).to.equal(0);
    expect(tree.filter(alive), "processes left running after Ctrl-C").to.deep.equal([]);
    expect((JSON.parse(readFileSync(join(start.dir, "network.json"), "utf8")) as NetworkFileJson).status).to.equal("stopped");
    expect(existsSync(join(start.dir, "manifest.json"))).to.equal(false);
  });
});
