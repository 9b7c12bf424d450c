/**
 * One chain's work, tick by tick: index new events (with reorg detection), settle open transactions, let the
 * pusher add a push when the oracle's proof is stale, then decide and carry out every due item. Watchers feed the
 * store, relayer/decide.ts decides, the submitter sends: no step holds state outside the store, so a restart
 * resumes exactly where the last commit left off.
 * Why one file: one chain's tick is one sequence over one store and one submitter (index, settle, push, decide, carry
 * out); what to do is decided in decide.ts and sending is submitter.ts's.
 */
import type { Logger } from "pino";
import { decodeFunctionData, encodeFunctionData } from "viem";
import { timeBridgeAbi, timeOracleAbi, timeSchedulerAbi } from "../abi";
import type { ClusterClient } from "../client";
import type { Address, Hex } from "../protocol/types";
import type { ChainClient, ContractCall, CrossChainTimeMessage, IndexedEvent, ScheduledCallRequest } from "./chain";
import { backoffMs, classifyRevert, decideCall, decideMessage, decidePush, decideRevoke, decideSource, isDeterministic, pushDue, type Decision } from "./decide";
import type { RelayerMetrics } from "./metrics";
import type { Item, NewItem, RelayerStore } from "./store";
import { FeeAboveCapError, InFlightFullError, Submitter, type SettledTx, type SubmitterOptions } from "./submitter";

const NS_PER_MS = 1_000_000n;

type WaitDecision = Extract<Decision, { action: "wait" }>;
/** The last check before a send (decideSource): send, or orphan the item. */
type BeforeSend = () => Promise<Extract<Decision, { action: "orphan" | "send" }>>;
/** The chain's head and safe block in one tick (ChainWorker.depthOfTick). */
interface Depth {
  head: bigint;
  safe: bigint | null;
}
/** Due items decided per tick and chain (bounded work per tick; the rest wait for the next). */
export const ITEMS_PER_TICK = 64;
/** Items decided at once per chain. */
const ITEM_CONCURRENCY = 16;

export interface WorkerSettings {
  maxLogRange: number;
  pushHeartbeatMs: number;
  keeperEnabled: boolean;
  bridgeEnabled: boolean;
  retryBaseMs: number;
  retryMaxMs: number;
  deterministicRevertLimit: number;
  /** Short wait for "not yet" answers, ms. */
  waitMs: number;
}

/** The payload of a bridge message item (bigints as decimal strings). */
interface MessagePayload {
  messageId: Hex;
  sourceChainId: number;
  sourceBridge: Address;
  nonce: string;
  message: { networkTime: string; targetChain: string; proof: Hex; targetBlock: string };
}

interface CallPayload {
  callId: Hex;
  request: { caller: Address; nonce: string; executeAt: string; window: string; gasLimit: number; bounty: string; data: Hex };
}

interface PushPayload {
  forced: boolean;
}

/** A guardian revocation: the signed alert it acts on (wire/rest.ts TamperAlertJson). */
export interface RevokePayload {
  cardId: Hex;
  nodeId: Address;
  reason: string;
  atNs: string;
  signature: Hex;
}

export function revokeItem(chainId: number, alert: RevokePayload, nowMs: number): NewItem {
  return { id: `revoke:${chainId}:${alert.cardId}`, kind: "revoke", chainId, sourceChainId: null, sourceBlock: null, payload: JSON.stringify(alert), nextAttemptMs: nowMs };
}

export function messageItemId(targetChainId: number, messageId: Hex): string {
  return `message:${targetChainId}:${messageId}`;
}

export function callItemId(chainId: number, callId: Hex): string {
  return `call:${chainId}:${callId}`;
}

export function pushItem(chainId: number, nowMs: number, forced: boolean): NewItem {
  const payload: PushPayload = { forced };
  return { id: `push:${chainId}:${nowMs}${forced ? ":forced" : ""}`, kind: "push", chainId, sourceChainId: null, sourceBlock: null, payload: JSON.stringify(payload), nextAttemptMs: nowMs };
}

function requestFromPayload(payload: CallPayload["request"]): ScheduledCallRequest {
  return {
    caller: payload.caller,
    nonce: BigInt(payload.nonce),
    executeAt: BigInt(payload.executeAt),
    window: BigInt(payload.window),
    gasLimit: payload.gasLimit,
    bounty: BigInt(payload.bounty),
    data: payload.data,
  };
}

function messageFromPayload(payload: MessagePayload["message"]): CrossChainTimeMessage {
  return { networkTime: BigInt(payload.networkTime), targetChain: BigInt(payload.targetChain), proof: payload.proof, targetBlock: BigInt(payload.targetBlock) };
}

/** What a call item's settling transaction did: executed it or expired it. */
function callOutcome(data: Hex): string {
  try {
    return decodeFunctionData({ abi: timeSchedulerAbi, data }).functionName === "expireCall" ? "expired" : "executed";
  } catch {
    return "settled";
  }
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split("\n")[0]!.slice(0, 300);
}

export class ChainWorker {
  readonly submitter: Submitter;
  /** Last tick's failure, null after a good tick (for /health). */
  lastError: string | null = null;
  lagBlocks = 0n;
  /** Head and safe block of the current tick's decisions (depthOfTick); cleared at each tick's start. */
  private tickDepth: Promise<Depth> | null = null;

  constructor(
    readonly chain: ChainClient,
    /** Every chain of the network by id (the bridge items' targets). */
    private readonly chains: ReadonlyMap<number, ChainClient>,
    private readonly store: RelayerStore,
    private readonly proofs: Pick<ClusterClient, "getCurrentTime">,
    private readonly settings: WorkerSettings,
    private readonly metrics: RelayerMetrics,
    private readonly log: Logger,
    private readonly nowMs: () => number,
    submitterOptions: Pick<SubmitterOptions, "feeBumpAfterMs" | "maxFeePerGasWei" | "crashAt">,
  ) {
    this.submitter = new Submitter(chain, store, { ...submitterOptions, nowMs, log });
    // At zero from the start: increase() reads a series born at 1 as no increase, and would miss the first one.
    metrics.tickFailures.inc({ chain: chain.config.name }, 0);
    metrics.reorgs.inc({ chain: chain.config.name }, 0);
  }

  private get chainId(): number {
    return this.chain.config.chainId;
  }

  async tick(): Promise<void> {
    try {
      await this.index();
      for (const settled of await this.submitter.track()) this.onSettled(settled);
      await this.pushIfStale();
      await this.processDue();
      this.lastError = null;
    } catch (error) {
      this.lastError = firstLine(error);
      this.metrics.tickFailures.inc({ chain: this.chain.config.name });
      this.log.warn({ chain: this.chain.config.name, err: this.lastError }, "tick failed; retried next tick");
    }
  }

  // ---- watchers ------------------------------------------------------------------------------------------------

  /** Indexes the next range of confirmed blocks; on a changed block hash at the cursor, walks back first. */
  private async index(): Promise<void> {
    const head = await this.chain.headBlock();
    const safe = await this.chain.safeBlock(head);
    const cursor = this.store.cursor(this.chainId);
    if (cursor !== undefined && (await this.chain.blockHash(cursor.blockNumber)) !== cursor.blockHash) {
      await this.rewind();
      return;
    }
    const from = cursor === undefined ? this.chain.config.startBlock : cursor.blockNumber + 1n;
    this.lagBlocks = safe >= from ? safe - from + 1n : 0n;
    this.metrics.lagBlocks.set({ chain: this.chain.config.name }, Number(this.lagBlocks));
    if (from > safe) return;
    const to = safe - from + 1n > BigInt(this.settings.maxLogRange) ? from + BigInt(this.settings.maxLogRange) - 1n : safe;
    const hashBefore = await this.chain.blockHash(to);
    const events = await this.chain.events(from, to);
    const hashAfter = await this.chain.blockHash(to);
    if (hashBefore === undefined || hashBefore !== hashAfter) return; // the range moved under us: next tick
    const items = events.flatMap((event) => this.itemOf(event));
    const inserted = this.store.advanceCursor(this.chainId, { blockNumber: to, blockHash: hashAfter }, items);
    if (inserted > 0) this.log.info({ chain: this.chain.config.name, from: String(from), to: String(to), items: inserted }, "indexed");
  }

  private async rewind(): Promise<void> {
    let ancestor;
    for (const position of this.store.cursorHistory(this.chainId)) {
      if ((await this.chain.blockHash(position.blockNumber)) === position.blockHash) {
        ancestor = position;
        break;
      }
    }
    const orphaned = this.store.rewindCursor(this.chainId, ancestor);
    this.metrics.reorgs.inc({ chain: this.chain.config.name });
    // Work already sent for an event that no longer exists is cancelled by the target chain's submitter on its next
    // tick (Submitter.keepAlive): a no-op outbids it at its nonce. If the original is mined first, it stands;
    // confirmations are what make that rare.
    this.log.warn(
      { chain: this.chain.config.name, ancestor: ancestor === undefined ? "start" : String(ancestor.blockNumber), orphaned: orphaned.length },
      "reorg: cursor moved back to the common ancestor",
    );
  }

  private itemOf(event: IndexedEvent): NewItem[] {
    const now = this.nowMs();
    if (event.kind === "TimeSent") {
      const targetChainId = Number(event.message.targetChain);
      const target = this.chains.get(targetChainId);
      if (!this.settings.bridgeEnabled || target === undefined || target.config.bridge === undefined || BigInt(targetChainId) !== event.message.targetChain) return [];
      const payload: MessagePayload = {
        messageId: event.messageId,
        sourceChainId: this.chainId,
        sourceBridge: event.bridge,
        nonce: event.nonce.toString(),
        message: {
          networkTime: event.message.networkTime.toString(),
          targetChain: event.message.targetChain.toString(),
          proof: event.message.proof,
          targetBlock: event.message.targetBlock.toString(),
        },
      };
      const id = messageItemId(targetChainId, event.messageId);
      return [{ id, kind: "message", chainId: targetChainId, sourceChainId: this.chainId, sourceBlock: event.blockNumber, payload: JSON.stringify(payload), nextAttemptMs: now }];
    }
    if (!this.settings.keeperEnabled) return [];
    const { request } = event;
    const payload: CallPayload = {
      callId: event.callId,
      request: {
        caller: request.caller,
        nonce: request.nonce.toString(),
        executeAt: request.executeAt.toString(),
        window: request.window.toString(),
        gasLimit: request.gasLimit,
        bounty: request.bounty.toString(),
        data: request.data,
      },
    };
    const dueMs = Number(request.executeAt / NS_PER_MS);
    return [
      { id: callItemId(this.chainId, event.callId), kind: "call", chainId: this.chainId, sourceChainId: this.chainId, sourceBlock: event.blockNumber, payload: JSON.stringify(payload), nextAttemptMs: Math.max(now, dueMs) },
    ];
  }

  /** The proof pusher: one push item per chain at a time, created when the stored proof is older than the heartbeat. */
  private async pushIfStale(): Promise<void> {
    if (this.settings.pushHeartbeatMs === 0 || this.store.hasOpenItem(this.chainId, "push")) return;
    const stored = await this.chain.storedNanoMomentNs();
    const nowNs = BigInt(this.nowMs()) * NS_PER_MS;
    if (pushDue(stored, nowNs, BigInt(this.settings.pushHeartbeatMs) * NS_PER_MS)) this.store.insertItem(pushItem(this.chainId, this.nowMs(), false));
  }

  // ---- decisions -----------------------------------------------------------------------------------------------

  /**
   * Bridge messages are submitted one after the other, oldest network time first: a bridge accepts only a time
   * newer than the last it delivered, so sending them out of order would make the older ones undeliverable. Their
   * reads and simulations still run at once; each waits for its predecessor only to submit. Calls and pushes are
   * independent and go ITEM_CONCURRENCY at a time (signing is serialised by the submitter).
   */
  private async processDue(): Promise<void> {
    this.tickDepth = null;
    const stranded = this.store.reviveStrandedSubmissions(this.chainId);
    if (stranded.length > 0) {
      this.log.warn({ chain: this.chain.config.name, items: stranded }, "submitted items without an open transaction (a crash after their settlement): decided again from on-chain state");
    }
    const due = this.store.dueItems(this.chainId, ITEMS_PER_TICK);
    const messages = due
      .filter((item) => item.kind === "message")
      .map((item) => ({ item, networkTime: BigInt((JSON.parse(item.payload) as MessagePayload).message.networkTime) }))
      .sort((a, b) => (a.networkTime < b.networkTime ? -1 : a.networkTime > b.networkTime ? 1 : 0));
    let previous: Promise<void> = Promise.resolve();
    const ordered = messages.map(({ item }) => {
      const done = this.process(item, previous);
      previous = done;
      return done;
    });
    const others = due.filter((item) => item.kind !== "message");
    for (let start = 0; start < others.length; start += ITEM_CONCURRENCY) {
      await Promise.all(others.slice(start, start + ITEM_CONCURRENCY).map((item) => this.process(item)));
    }
    await Promise.all(ordered);
  }

  /** Decides one item and carries the decision out; every failure is recorded on the item, never thrown. */
  async process(item: Item, submitAfter: Promise<void> = Promise.resolve()): Promise<void> {
    try {
      switch (item.kind) {
        case "message":
          return await this.processMessage(item, JSON.parse(item.payload) as MessagePayload, submitAfter);
        case "call":
          return await this.processCall(item, JSON.parse(item.payload) as CallPayload);
        case "push":
          return await this.processPush(item, JSON.parse(item.payload) as PushPayload);
        case "revoke":
          return await this.processRevoke(item, JSON.parse(item.payload) as RevokePayload);
      }
    } catch (error) {
      if (error instanceof FeeAboveCapError || error instanceof InFlightFullError) {
        this.store.postpone(item.id, this.nowMs() + this.settings.retryBaseMs, error.message);
        return;
      }
      // Transport trouble (an RPC or a node down): retried with backoff, never counted as a deterministic revert.
      this.fail(item, "Unavailable", firstLine(error));
    }
  }

  private async processMessage(item: Item, payload: MessagePayload, submitAfter: Promise<void>): Promise<void> {
    const message = messageFromPayload(payload.message);
    const decideAt = async (blockNumber?: bigint) =>
      decideMessage({
        deliveredBlock: await this.chain.deliveredBlock(payload.messageId, blockNumber),
        latestNetworkTimeNs: await this.chain.latestNetworkTimeNs(blockNumber),
        networkTimeNs: message.networkTime,
      });
    const decision = await this.confirmedAtSafeBlock(await decideAt(), decideAt);
    if (decision.action !== "send") return this.apply(item, decision);
    await this.simulateAndSubmit(
      item,
      { to: this.chain.config.bridge!, abi: timeBridgeAbi, data: encodeFunctionData({ abi: timeBridgeAbi, functionName: "receiveTime", args: [message] }) },
      submitAfter,
      () => this.sourceOfMessage(item, payload),
    );
  }

  /**
   * Whether the message's TimeSent is still where it was indexed, read on its source chain now. The target bridge
   * verifies the proof, not the source: without this look, a message whose send a reorg deeper than the
   * confirmations took back would be delivered all the same. An unreadable source chain throws (retried as
   * Unavailable): nothing is sent unchecked. A scheduled call needs no such look: its own chain's scheduler refuses
   * a call it does not hold (status None); a push and a revocation come from no chain event.
   */
  private async sourceOfMessage(item: Item, payload: MessagePayload): ReturnType<BeforeSend> {
    const source = this.chains.get(payload.sourceChainId);
    if (source === undefined || item.sourceBlock === null) throw new Error(`message ${item.id}: its source chain ${payload.sourceChainId} is not in the network file`);
    return decideSource({
      eventCanonical: await source.timeSentIn(payload.sourceBridge, payload.messageId, item.sourceBlock),
      sourceChain: source.config.name,
      sourceBlock: item.sourceBlock,
      eventName: "TimeSent",
    });
  }

  private async processCall(item: Item, payload: CallPayload): Promise<void> {
    const request = requestFromPayload(payload.request);
    const chainNowNs = await this.chain.blockTimestampNs();
    const nowNs = BigInt(this.nowMs()) * NS_PER_MS;
    const decideAt = async (blockNumber?: bigint) =>
      decideCall({
        status: await this.chain.callStatus(payload.callId, blockNumber),
        executeAtNs: request.executeAt,
        deadlineNs: request.executeAt + request.window,
        chainNowNs,
        nowNs,
      });
    const decision = await this.confirmedAtSafeBlock(await decideAt(), decideAt);
    const scheduler = this.chain.config.scheduler!;
    if (decision.action === "expire") {
      return this.simulateAndSubmit(item, { to: scheduler, abi: timeSchedulerAbi, data: encodeFunctionData({ abi: timeSchedulerAbi, functionName: "expireCall", args: [request] }) });
    }
    if (decision.action !== "execute") return this.apply(item, decision);
    const { proof } = await this.proofs.getCurrentTime();
    if (proof.nanoMoment < request.executeAt) {
      const aheadMs = Number((request.executeAt - proof.nanoMoment + NS_PER_MS - 1n) / NS_PER_MS);
      this.store.postpone(item.id, this.nowMs() + aheadMs, "the attested time is before executeAt");
      return;
    }
    const data = encodeFunctionData({ abi: timeSchedulerAbi, functionName: "executeCall", args: [request, proof] });
    await this.simulateAndSubmit(item, { to: scheduler, abi: timeSchedulerAbi, data });
  }

  private async processPush(item: Item, payload: PushPayload): Promise<void> {
    // Decided at the head alone (not confirmedAtSafeBlock): a proof stored at the safe block is at least that many
    // blocks old, so with a heartbeat shorter than the depth the safe block could never say "fresh"; and a fresh
    // proof a reorg takes back loses nothing, since the pusher creates a new item once the head's proof is stale.
    const decision = decidePush({
      storedNanoMomentNs: await this.chain.storedNanoMomentNs(),
      nowNs: BigInt(this.nowMs()) * NS_PER_MS,
      heartbeatNs: BigInt(this.settings.pushHeartbeatMs) * NS_PER_MS,
      forced: payload.forced,
    });
    if (decision.action !== "send") return this.apply(item, decision);
    const { proof } = await this.proofs.getCurrentTime();
    const data = encodeFunctionData({ abi: timeOracleAbi, functionName: "submitTimeProof", args: [proof] });
    await this.simulateAndSubmit(item, { to: this.chain.config.oracle, abi: timeOracleAbi, data });
  }

  private async processRevoke(item: Item, payload: RevokePayload): Promise<void> {
    const decideAt = async (blockNumber?: bigint) =>
      decideRevoke({ cardStatus: await this.chain.cardStatus(payload.cardId, blockNumber), alertSignerStatus: await this.chain.nodeStatus(payload.nodeId, blockNumber) });
    const decision = await this.confirmedAtSafeBlock(await decideAt(), decideAt);
    if (decision.action !== "send") return this.apply(item, decision);
    this.log.error({ chain: this.chain.config.name, cardId: payload.cardId, node: payload.nodeId, reason: payload.reason }, "guardian: revoking a card after its node's signed tamper alert");
    const data = encodeFunctionData({ abi: timeOracleAbi, functionName: "revokeCard", args: [payload.cardId] });
    await this.simulateAndSubmit(item, { to: this.chain.config.oracle, abi: timeOracleAbi, data });
  }

  /** Simulates `call` and sends it, after `submitAfter` and only if `beforeSend` (read last, just before signing) says so. */
  private async simulateAndSubmit(item: Item, call: ContractCall, submitAfter: Promise<void> = Promise.resolve(), beforeSend?: BeforeSend): Promise<void> {
    const simulation = await this.chain.simulate(call);
    if (!simulation.ok) {
      const policy = classifyRevert(item.kind, simulation.errorName);
      // Terminal on the head's word only once the safe block reverts the same way (see confirmedAtSafeBlock); a push
      // is decided at the head alone (processPush).
      const confirmTerminal = item.kind !== "push";
      if ((policy.verdict === "done" || policy.verdict === "dead") && confirmTerminal) {
        const depth = await this.revertsAtSafeBlock(call, simulation.errorName);
        if (depth !== true) return this.apply(item, this.notYetDeep(`${policy.verdict}: ${policy.note} (${simulation.errorName})`, depth));
      }
      switch (policy.verdict) {
        case "done":
          return this.apply(item, { action: "done", outcome: `${policy.note} (${simulation.errorName})` });
        case "dead":
          return this.apply(item, { action: "dead", reason: `${policy.note}: ${simulation.message}` });
        case "wait":
          return this.apply(item, { action: "wait", untilMs: this.nowMs() + this.settings.waitMs, note: `${policy.note}: ${simulation.message}` });
        case "retry": {
          const message = `${policy.note}: ${simulation.message}`;
          const same = this.fail(item, simulation.errorName, message);
          // The same revert N times in a row dead-letters, but again only on the safe block's word too.
          if (isDeterministic(same, this.settings.deterministicRevertLimit) && (!confirmTerminal || (await this.revertsAtSafeBlock(call, simulation.errorName)) === true)) {
            this.deadLetterDeterministic(item, simulation.errorName, same, message);
          }
          return;
        }
      }
    }
    await submitAfter;
    if (beforeSend !== undefined) {
      const last = await beforeSend();
      if (last.action !== "send") return this.apply(item, last);
    }
    const hash = await this.submitter.submit(item.id, call.to, call.data, simulation.gas);
    this.log.info({ item: item.id, chain: this.chain.config.name, hash }, "submitted");
  }

  /**
   * A terminal decision read at the chain's head (done: the goal was reached another way; dead: it never can be)
   * stands only when `decideAt` the safe block (head − confirmations, or the finalized block) decides the same.
   * A reorg can take back what the head shows (another relayer's delivery or settlement, a revocation, a newer
   * time) as it can take back our own transactions, which count only once they are that deep (submitter.ts):
   * finishing an item on the head's word alone would lose it for good if that block is replaced. Until then the
   * item waits and is decided again (a wait counts as no failure). Any other decision is returned as it is.
   * Reading state at the safe block needs an RPC that keeps state that far back (docs/relayer.md).
   */
  private async confirmedAtSafeBlock<D extends { action: string }>(atHead: D, decideAt: (blockNumber: bigint) => Promise<D>): Promise<D | WaitDecision> {
    if (atHead.action !== "done" && atHead.action !== "dead") return atHead;
    const depth = await this.depthOfTick();
    if (depth.safe === null) return atHead;
    if (depth.safe >= 0n && (await decideAt(depth.safe)).action === atHead.action) return atHead;
    return this.notYetDeep(atHead.action, depth);
  }

  /** True when `call` reverts with `errorName` at the safe block too (or the head is final); else the depth to wait for. */
  private async revertsAtSafeBlock(call: ContractCall, errorName: string): Promise<true | Depth> {
    const depth = await this.depthOfTick();
    if (depth.safe === null) return true;
    if (depth.safe >= 0n && (await this.chain.revertNameAt(call, depth.safe)) === errorName) return true;
    return depth;
  }

  /**
   * The chain's head and safe block, read once per tick for every item decided in it; `safe` is null when it is the
   * head itself (confirmations 0: the head's word is final by choice), and negative on a chain still shorter than
   * its confirmations (nothing is deep yet).
   */
  private depthOfTick(): Promise<Depth> {
    this.tickDepth ??= (async () => {
      const head = await this.chain.headBlock();
      const safe = await this.chain.safeBlock(head);
      return { head, safe: safe >= head ? null : safe };
    })();
    return this.tickDepth;
  }

  /**
   * Waits about as long as the safe block needs to reach today's head: one `waitMs` per block of depth, at most
   * `retryMaxMs` (each decision again reads the chain: a wait of one poll per item would multiply the reads).
   */
  private notYetDeep(what: string, depth: Depth): WaitDecision {
    const blocks = depth.safe === null ? 1 : Number(depth.head - depth.safe);
    const waitMs = Math.min(this.settings.retryMaxMs, Math.max(1, blocks) * this.settings.waitMs);
    return { action: "wait", untilMs: this.nowMs() + waitMs, note: `${what} at the chain head (block ${depth.head}), not yet at the safe block ${depth.safe}: decided again once it is deep enough` };
  }

  private apply(item: Item, decision: Exclude<Decision, { action: "send" }>): void {
    switch (decision.action) {
      case "done":
        this.store.finish(item.id, decision.outcome);
        this.metrics.finished.inc({ kind: item.kind, outcome: "done" });
        return;
      case "dead":
        this.store.deadLetter(item.id, decision.reason);
        this.metrics.finished.inc({ kind: item.kind, outcome: "dead" });
        this.log.warn({ item: item.id, reason: decision.reason }, "dead-letter");
        return;
      case "wait":
        this.store.postpone(item.id, decision.untilMs, decision.note);
        return;
      case "orphan":
        this.store.orphan(item.id, decision.reason);
        this.metrics.finished.inc({ kind: item.kind, outcome: "orphaned" });
        this.log.warn({ item: item.id, reason: decision.reason }, "orphaned");
        return;
    }
  }

  /** A counted failure with backoff; returns how many times in a row this error name was seen. */
  private fail(item: Item, errorName: string, message: string): number {
    this.metrics.failures.inc({ kind: item.kind, reason: errorName });
    const delay = backoffMs(item.attempts + 1, this.settings.retryBaseMs, this.settings.retryMaxMs, Math.random());
    // Logged at warn: a retried item is otherwise silent until its backoff has grown past what an operator waits
    // for. The backoff bounds the volume (one line per attempt).
    this.log.warn({ item: item.id, chain: this.chain.config.name, attempt: item.attempts + 1, err: errorName, reason: message, retryInMs: delay }, "attempt failed; retried");
    return this.store.recordFailure(item.id, errorName, message, this.nowMs() + delay);
  }

  /** Dead-letters an item whose revert came `same` times in a row (the deterministic-revert rule). */
  private deadLetterDeterministic(item: Item, errorName: string, same: number, message: string): void {
    this.apply(item, { action: "dead", reason: `deterministic revert: ${errorName} ${same} times in a row: ${message}` });
  }

  /** A job's nonce settled: success finishes it; a revert or a lost nonce sends it back to be decided again. */
  private onSettled(settled: SettledTx): void {
    const item = this.store.item(settled.itemId);
    if (item === undefined) return;
    // An item orphaned after its transaction went out (a reorg of its source): the cancellation lost the race when
    // that transaction is mined, and a mined delivery cannot be recalled; the store says so instead of "orphaned".
    const minedAfterOrphaning = item.status === "orphaned" && settled.receipt?.status === "success";
    if (item.status !== "submitted" && !minedAfterOrphaning) return;
    if (settled.receipt === null) {
      this.store.postpone(item.id, this.nowMs(), "its nonce was taken by another transaction");
      return;
    }
    if (settled.receipt.status === "success") {
      const outcome = item.kind === "call" ? callOutcome(settled.data) : { message: "delivered", push: "pushed", revoke: "revoked" }[item.kind];
      const late = minedAfterOrphaning ? " (orphaned by a reorg of its source after it was sent; mined before its cancellation)" : "";
      this.store.finish(item.id, `${outcome} in block ${settled.receipt.blockNumber} by ${settled.hash}${late}`, minedAfterOrphaning);
      this.metrics.finished.inc({ kind: item.kind, outcome });
      return;
    }
    // Our own transaction reverted in a block already `confirmations` deep (the submitter settles only then).
    const message = `transaction ${settled.hash} reverted in block ${settled.receipt.blockNumber}`;
    const same = this.fail(item, "TxReverted", message);
    if (isDeterministic(same, this.settings.deterministicRevertLimit)) this.deadLetterDeterministic(item, "TxReverted", same, message);
  }
}
