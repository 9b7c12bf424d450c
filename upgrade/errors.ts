/**
 * The agent's one error type. A refusal is a decision, not a crash: it carries a stable `code` (what tests and the
 * receipt match on) and the evidence that led to it (digests, versions, paths the agent owns; never a secret).
 */
export type RefusalCode =
  | "plan-invalid"
  | "bad-checksum"
  | "fetch-failed"
  | "moved-tag"
  | "unapproved-release"
  | "wrong-platform"
  | "downgrade"
  | "install-conflict"
  | "unsafe-archive"
  | "network-degraded"
  | "preflight-failed"
  | "not-confirmed"
  | "rollout-interrupted"
  | "unit-failed";

export class UpgradeRefusal extends Error {
  override readonly name = "UpgradeRefusal";
  constructor(
    readonly code: RefusalCode,
    message: string,
    readonly evidence: Readonly<Record<string, string | number | boolean | null>> = {},
  ) {
    super(message);
  }
}

/** An error's message (a thrown non-Error as text), for refusals and receipts. */
export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
