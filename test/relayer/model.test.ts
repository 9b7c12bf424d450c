/**
 * Model-based test of the relayer (fast-check `fc.commands`): random sequences of emit (either direction), mine,
 * reorg (a snapshot and revert across blocks the relayer may already have indexed), crash (SIGKILL), restart and
 * RPC errors (a chaos proxy in front of each chain), on two Hardhat node chains with a real attesting node and
 * `ats-relayer` as a child process. The invariant, after the relayer settles: the delivered message ids are
 * exactly the emitted ones, each delivered once on its target chain, and the store holds no open transaction.
 */
import { expect } from "chai";
import fc from "fast-check";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import hre from "hardhat";
import pino from "pino";
import type { Hex } from "viem";
import type { NetworkFileJson } from "../../wire/network";
import { RelayerStore } from "../../relayer/store";
import { messageItemId } from "../../relayer/worker";
import { startLocalNetwork, type LocalChain, type LocalNetwork } from "../../scripts/network";
import { startRelayerProcess, stopRelayerProcess, type RelayerProcess } from "../../scripts/relayerProcess";
import { startChaosProxy, type ChaosProxy, type FaultKind } from "./chaosProxy";
import { deliveredIds, deliveriesOf, pollUntil, sendFreshTime } from "./helpers";

interface Model {
  /** Emitted message ids by target chain index. */
  emitted: Hex[][];
  running: boolean;
}

interface Real {
  network: LocalNetwork;
  chains: [LocalChain, LocalChain];
  proxies: [ChaosProxy, ChaosProxy];
  configFile: string;
  relayer: RelayerProcess | undefined;
}

class EmitCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly from: 0 | 1) {}
  check = () => true;
  async run(model: Model, real: Real): Promise<void> {
    const to = (1 - this.from) as 0 | 1;
    model.emitted[to]!.push(await sendFreshTime(real.network, real.chains[this.from], real.chains[to]));
  }
  toString = () => `emit(${this.from}→${1 - this.from})`;
}

class MineCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly chain: 0 | 1, readonly blocks: number) {}
  check = () => true;
  async run(_model: Model, real: Real): Promise<void> {
    await real.chains[this.chain].control.mine(this.blocks);
  }
  toString = () => `mine(${this.chain}, ${this.blocks})`;
}

/** A reorg of empty blocks: the relayer's cursor may sit on one of them, and must walk back. */
class ReorgCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly chain: 0 | 1, readonly depth: number) {}
  check = () => true;
  async run(_model: Model, real: Real): Promise<void> {
    const chain = real.chains[this.chain];
    const snapshot = await chain.control.snapshot();
    await chain.control.mine(this.depth);
    await new Promise((resolve) => setTimeout(resolve, 150)); // let the relayer index them
    expect(await chain.control.revert(snapshot)).to.equal(true);
    await chain.control.mine(this.depth + 1); // another, longer history
  }
  toString = () => `reorg(${this.chain}, ${this.depth})`;
}

class CrashCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly afterMs: number) {}
  check = (model: Readonly<Model>) => model.running;
  async run(model: Model, real: Real): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, this.afterMs));
    await stopRelayerProcess(real.relayer, "SIGKILL");
    real.relayer = undefined;
    model.running = false;
  }
  toString = () => `crash(after ${this.afterMs} ms)`;
}

class RestartCommand implements fc.AsyncCommand<Model, Real> {
  check = (model: Readonly<Model>) => !model.running;
  async run(model: Model, real: Real): Promise<void> {
    real.relayer = await startRelayerProcess(real.configFile, real.network.relayerEnv);
    model.running = true;
  }
  toString = () => "restart";
}

class RpcErrorCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly chain: 0 | 1, readonly kind: FaultKind, readonly method: string) {}
  check = () => true;
  async run(_model: Model, real: Real): Promise<void> {
    real.proxies[this.chain].inject({ method: this.method, kind: this.kind, remaining: 1, lag: 1 });
  }
  toString = () => `rpcError(${this.chain}, ${this.kind}, ${this.method})`;
}

describe("relayer model-based test (fc.commands: emit, mine, reorg, crash, restart, RPC error)", function () {
  this.timeout(600_000);
  let dir: string;
  let real: Real;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "ats-relayer-model-"));
    const network = await startLocalNetwork({ hre, dir, meshNodes: 1, nodeLogger: pino({ level: "silent" }) });
    const chains = network.chains as [LocalChain, LocalChain];
    const proxies = [await startChaosProxy(chains[0].rpcUrl), await startChaosProxy(chains[1].rpcUrl)] as [ChaosProxy, ChaosProxy];
    const file = JSON.parse(readFileSync(network.networkFile, "utf8")) as NetworkFileJson;
    file.chains = file.chains.map((chain, index) => ({ ...chain, rpcUrl: proxies[index]!.url }));
    writeFileSync(join(dir, "model-network.json"), JSON.stringify(file));
    const configFile = join(dir, "model-relayer.json");
    writeFileSync(configFile, JSON.stringify({ networkFile: "model-network.json", dataDir: "model-data", apiPort: 0, pollIntervalMs: 100, retryBaseMs: 100, retryMaxMs: 2_000, rpcTimeoutMs: 500, pushHeartbeatMs: 0 }));
    real = { network, chains, proxies, configFile, relayer: undefined };
  });

  after(async () => {
    await stopRelayerProcess(real?.relayer, "SIGKILL");
    for (const proxy of real?.proxies ?? []) await proxy.close();
    await real?.network.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("delivers exactly the emitted messages, each once, whatever the sequence", async () => {
    /** Every id emitted so far, by target (runs share the chains). */
    const allEmitted: [Set<Hex>, Set<Hex>] = [new Set(), new Set()];
    let commandsRun = 0;
    const chainIndex = fc.constantFrom<0 | 1>(0, 1);
    const commands = [
      chainIndex.map((from) => new EmitCommand(from)),
      chainIndex.map((from) => new EmitCommand(from)), // emits weigh double
      fc.tuple(chainIndex, fc.integer({ min: 1, max: 3 })).map(([chain, blocks]) => new MineCommand(chain, blocks)),
      fc.tuple(chainIndex, fc.integer({ min: 1, max: 3 })).map(([chain, depth]) => new ReorgCommand(chain, depth)),
      fc.integer({ min: 0, max: 400 }).map((afterMs) => new CrashCommand(afterMs)),
      fc.constant(new RestartCommand()),
      fc
        .tuple(chainIndex, fc.constantFrom<[FaultKind, string]>(["drop-answer", "eth_sendRawTransaction"], ["underpriced", "eth_sendRawTransaction"], ["stale-nonce", "eth_getTransactionCount"], ["timeout", "eth_getTransactionReceipt"], ["timeout", "eth_getLogs"]))
        .map(([chain, [kind, method]]) => new RpcErrorCommand(chain, kind, method)),
    ];
    await fc.assert(
      fc.asyncProperty(fc.commands(commands, { maxCommands: 8 }), async (cmds) => {
        real.relayer = await startRelayerProcess(real.configFile, real.network.relayerEnv);
        const model: Model = { emitted: [[], []], running: true };
        try {
          await fc.asyncModelRun(() => ({ model, real }), cmds);
          commandsRun += [...cmds].length;
          if (!model.running) real.relayer = await startRelayerProcess(real.configFile, real.network.relayerEnv);
          for (const index of [0, 1] as const) {
            const target = real.chains[index];
            const ids = model.emitted[index]!;
            try {
              await pollUntil(async () => ((await deliveriesOf(target, ids)).every((count) => count >= 1) ? true : undefined), `delivery of ${ids.length} messages to chain ${index}`, 60_000);
            } catch (error) {
              // The evidence a failed sequence needs: what the relayer holds for each message, and its last log lines.
              const items = await Promise.all(ids.map(async (id) => (await fetch(`${real.relayer!.api}/items/${messageItemId(target.chainId, id)}`)).text()));
              throw new Error(`${(error as Error).message}\nitems: ${items.join("\n")}\nrelayer log tail:\n${real.relayer!.stderrTail()}`, { cause: error });
            }
            expect(await deliveriesOf(target, ids), `each message delivered once on chain ${index}`).to.deep.equal(ids.map(() => 1));
            for (const id of ids) allEmitted[index].add(id);
            const delivered = await deliveredIds(target);
            expect(delivered.filter((id) => !allEmitted[index].has(id)), `deliveries on chain ${index} that nobody emitted`).to.deep.equal([]);
            const api = real.relayer!.api;
            for (const id of ids) {
              const response = await fetch(`${api}/items/${messageItemId(target.chainId, id)}`);
              expect(response.status, id).to.equal(200);
            }
          }
          await pollUntil(async () => {
            const store = new RelayerStore(join(dir, "model-data"));
            try {
              return real.chains.every((chain) => store.openTxs(chain.chainId).length === 0) ? true : undefined;
            } finally {
              store.close();
            }
          }, "every open transaction's settlement", 60_000);
        } finally {
          await stopRelayerProcess(real.relayer, "SIGKILL");
          real.relayer = undefined;
        }
      }),
      // FC_SEED=<seed> replays the sequences of a failed run (fast-check prints its seed).
      { numRuns: 4, endOnFailure: true, ...(process.env.FC_SEED === undefined ? {} : { seed: Number(process.env.FC_SEED) }) },
    );
    expect(commandsRun, "commands run over all sequences").to.be.greaterThan(4);
  });
});
