/**
 * The proof inspector: a proof pasted as its REST JSON (docs/protocol.md §9.1, the body of GET /time/current) is
 * posted to the explorer's server, which runs `explainTimeProof` (client/explain.ts: protocol/verify.ts against the
 * chain's oracle and registries, and the oracle's own verdict) and answers every §6.2 rule as passed, failed or not
 * reached. The rules run there because protocol/ verifies with node:crypto (OpenSSL), which a browser lacks; the
 * page reimplements none of them.
 */
import type { ExplainAnswer } from "../../../wire/explorer";
import { durationNs, utcWithNs } from "../format";
import { h, render } from "../dom";
import { errorText } from "../poll";

async function explain(url: string, text: string): Promise<ExplainAnswer> {
  const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: text, signal: AbortSignal.timeout(15_000) });
  const body = (await response.json().catch(() => null)) as (ExplainAnswer & { message?: string }) | { message?: string } | null;
  if (!response.ok) throw new Error(body?.message ?? `HTTP ${response.status}`);
  return body as ExplainAnswer;
}

function renderAnswer(target: HTMLElement, answer: ExplainAnswer): void {
  const evidence = answer.evidence;
  render(
    target,
    h("p", { class: `verdict ${answer.valid ? "ok" : "bad"}`, "data-testid": "inspector-verdict" }, answer.valid ? "valid: every rule passes" : `invalid: ${answer.reason} — ${answer.detail}`),
    h("p", { class: "small" }, `the oracle itself says: ${answer.onChainValid ? "valid" : "invalid"}`),
    answer.hint === null ? null : h("p", { class: "hint" }, answer.hint),
    h(
      "table",
      { class: "rules" },
      h("thead", {}, h("tr", {}, h("th", {}, "§6.2"), h("th", {}, "rule"), h("th", {}, "reason when it fails"), h("th", {}, "result"))),
      h(
        "tbody",
        {},
        ...answer.rules.map((rule) =>
          h("tr", { class: `rule ${rule.status.replace(" ", "-")}`, "data-testid": "inspector-rule", "data-reason": rule.reason, "data-status": rule.status }, h("td", {}, rule.rule), h("td", {}, rule.condition), h("td", {}, h("code", {}, rule.reason)), h("td", {}, rule.status)),
        ),
      ),
    ),
    h(
      "div",
      { class: "evidence" },
      h("div", { class: "kv" }, h("span", {}, "chain clock"), h("span", {}, utcWithNs(evidence.chainNowNs))),
      h("div", { class: "kv" }, h("span", {}, "proof moment"), h("span", {}, utcWithNs(evidence.nanoMoment), " ", h("code", {}, evidence.nanoMoment))),
      h("div", { class: "kv" }, h("span", {}, "age at the chain's clock"), h("span", {}, `${durationNs(evidence.ageNs)} (at most ${durationNs(evidence.maxAttestationAgeNs)})`)),
      h("div", { class: "kv" }, h("span", {}, "signed accuracy"), h("span", {}, `±${durationNs(BigInt(evidence.accuracyNs))} (at most ±${durationNs(evidence.maxAcceptableDriftNs)})`)),
      h("div", { class: "kv" }, h("span", {}, "card"), h("span", {}, evidence.cardId === null ? "unreadable" : `${evidence.cardId} (${evidence.cardStatus ?? "?"})`)),
      h("div", { class: "kv" }, h("span", {}, "node entries"), h("span", {}, `${evidence.entries.length} (quorum ${evidence.nodeQuorum}, ${evidence.registeredNodes} registered): `, ...evidence.entries.map((entry) => h("code", { class: entry.active ? "ok" : "bad" }, `${entry.recovered ?? "unrecoverable"} `)))),
    ),
  );
}

export function startInspector(explainUrl: string, firstNode: string | undefined, elements: { input: HTMLTextAreaElement; run: HTMLButtonElement; fetchLatest: HTMLButtonElement; result: HTMLElement }): void {
  elements.run.addEventListener("click", () => {
    const text = elements.input.value.trim();
    if (text === "") {
      render(elements.result, h("p", { class: "error" }, "paste a proof's JSON first (the body of GET /time/current)"));
      return;
    }
    render(elements.result, h("p", { class: "muted" }, "checking every rule…"));
    explain(explainUrl, text).then(
      (answer) => renderAnswer(elements.result, answer),
      (error: unknown) => render(elements.result, h("p", { class: "error", "data-testid": "inspector-error" }, errorText(error))),
    );
  });
  elements.fetchLatest.disabled = firstNode === undefined;
  elements.fetchLatest.addEventListener("click", () => {
    if (firstNode === undefined) return;
    fetch(`${firstNode.replace(/\/+$/, "")}/time/current`, { signal: AbortSignal.timeout(5_000) })
      .then((response) => response.text())
      .then(
        (text) => {
          elements.input.value = JSON.stringify(JSON.parse(text), null, 2);
        },
        (error: unknown) => render(elements.result, h("p", { class: "error" }, errorText(error))),
      );
  });
}
