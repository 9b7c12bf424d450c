/**
 * A PKCS#11 token (an HSM, a YubiHSM, a cloud HSM, SoftHSM2 for tests) as the holder of the card's P-256 key and the
 * node's secp256k1 key, through the `pkcs11js` binding (an optional peer dependency: loaded on first use, with the
 * one command that installs it when missing).
 *
 * One Pkcs11Token is one loaded module, one logged-in session on one token. Every call is synchronous and made on the
 * thread that opened it (the node's serving thread: see docs/operators.md "Keys in a PKCS#11 token" for why the
 * signer thread never holds a token key), so C_SignInit/C_Sign pairs never interleave on the session.
 *
 * Keys are found by CKA_LABEL; a label names one key pair (a private and a public object). Generated keys are
 * non-extractable and sensitive (CKA_EXTRACTABLE false, CKA_SENSITIVE true), and a key found without those
 * attributes is refused: the token must be the only place the key exists.
 *
 * Errors name the module, slot, label and PKCS#11 return code: never the PIN, never key material.
 */
import { readFileSync, statSync } from "node:fs";
import { AuthError, NotFoundError, UnavailableError, ValidationError } from "../../protocol/errors";
import { EC_PARAMS_DER, ecPointFromAttribute, rawSignatureFromToken, type TokenCurve } from "./tokenSignature";

type Pkcs11Module = typeof import("pkcs11js");
type Pkcs11 = import("pkcs11js").PKCS11;
type Handle = Buffer;

/** The longest PIN file read (a PIN is a short string; a bigger file is the wrong file). */
export const MAX_PIN_FILE_BYTES = 256;
/** The most objects one label lookup reads: more than a handful under one label is a misconfigured token. */
const MAX_OBJECTS_PER_LABEL = 8;

let binding: Pkcs11Module | undefined;

/** pkcs11js, loaded on first use (an operator-only optional peer dependency, like better-sqlite3). */
export function loadPkcs11Binding(): Pkcs11Module {
  if (binding !== undefined) return binding;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- optional native addon, loaded only when a key is in a token
    binding = require("pkcs11js") as Pkcs11Module;
  } catch (cause) {
    throw new UnavailableError("PKCS#11 keys need the pkcs11js package (a native addon): npm install pkcs11js", {}, { cause });
  }
  return binding;
}

/** Where the token is and how to log in to it. */
export interface Pkcs11TokenSettings {
  /** Path of the PKCS#11 module (.so), e.g. /usr/lib/softhsm/libsofthsm2.so. */
  modulePath: string;
  /** The slot id; null: the slot whose token has tokenLabel. */
  slotId: number | null;
  /** CKA label of the token (blank-padded to 32 bytes by PKCS#11; compared trimmed). Used when slotId is null. */
  tokenLabel: string;
  /** The user PIN (readTokenPin). */
  pin: string;
}

/** Where the PIN comes from: a file (when set) or an environment variable. Never the configuration itself. */
export interface TokenPinSource {
  /** Path of a file holding the PIN (one line); empty: read pinEnv instead. */
  pinFile: string;
  /** Name of the environment variable holding the PIN. */
  pinEnv: string;
  env: NodeJS.ProcessEnv;
}

/**
 * The token PIN from its file (must not be readable by group or others, like a key file; at most MAX_PIN_FILE_BYTES;
 * one trailing newline dropped) or its environment variable. Errors name the source, never the value.
 */
export function readTokenPin(source: TokenPinSource): string {
  if (source.pinFile !== "") {
    let mode: number;
    let size: number;
    try {
      ({ mode, size } = statSync(source.pinFile));
    } catch (cause) {
      throw new NotFoundError("PKCS#11 PIN file is missing", { pinFile: source.pinFile }, { cause });
    }
    if ((mode & 0o077) !== 0) throw new AuthError("PKCS#11 PIN file is readable by group or others; chmod 600 it", { pinFile: source.pinFile, mode: (mode & 0o777).toString(8) });
    if (size > MAX_PIN_FILE_BYTES) throw new ValidationError("pkcs11PinFile", `holds more than ${MAX_PIN_FILE_BYTES} bytes: not a PIN`, { pinFile: source.pinFile, bytes: size });
    const pin = readFileSync(source.pinFile, "utf8").replace(/\r?\n$/, "");
    if (pin === "") throw new ValidationError("pkcs11PinFile", "is empty", { pinFile: source.pinFile });
    return pin;
  }
  const pin = source.env[source.pinEnv];
  if (pin === undefined || pin === "") throw new AuthError(`PKCS#11 PIN: environment variable ${source.pinEnv} is not set`, { pinEnv: source.pinEnv });
  return pin;
}

/** A slot handle (CK_SLOT_ID, native-endian CK_ULONG bytes) as a number. */
function slotIdOf(handle: Handle): number {
  let value = 0n;
  for (let index = handle.length - 1; index >= 0; index -= 1) value = (value << 8n) | BigInt(handle[index]!);
  return Number(value);
}

/** The PKCS#11 return code of a binding error (CKR_…), or the error's text. */
function returnCode(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return /CKR_[A-Z_]+/.exec(message)?.[0] ?? message.slice(0, 200);
}

/** A key pair on the token: the private key's handle and the public key's uncompressed point. */
export interface TokenKeyPair {
  label: string;
  curve: TokenCurve;
  privateKey: Handle;
  /** 65 bytes, 0x04 ‖ X ‖ Y. */
  publicKey: Buffer;
}

/** What the token says about a private key's protection (the system test checks these). */
export interface TokenKeyProtection {
  extractable: boolean;
  sensitive: boolean;
  /** Whether C_GetAttributeValue(CKA_VALUE) returned the key (it must not). */
  valueReadable: boolean;
}

export class Pkcs11Token {
  readonly modulePath: string;
  readonly slotId: number;
  readonly #p11: Pkcs11;
  readonly #pkcs11: Pkcs11Module;
  #session: Handle | null;

  private constructor(pkcs11: Pkcs11Module, p11: Pkcs11, modulePath: string, slotId: number, session: Handle) {
    this.#pkcs11 = pkcs11;
    this.#p11 = p11;
    this.modulePath = modulePath;
    this.slotId = slotId;
    this.#session = session;
  }

  /** Loads the module, finds the slot, opens a read-write session and logs in as the user. */
  static open(settings: Pkcs11TokenSettings): Pkcs11Token {
    const pkcs11 = loadPkcs11Binding();
    const p11 = new pkcs11.PKCS11();
    const evidence = { module: settings.modulePath, slotId: settings.slotId, tokenLabel: settings.tokenLabel };
    try {
      p11.load(settings.modulePath);
    } catch (cause) {
      throw new UnavailableError(`PKCS#11 module does not load: ${returnCode(cause)}`, evidence, { cause });
    }
    let initialized = false;
    try {
      p11.C_Initialize();
      initialized = true;
      const slot = Pkcs11Token.#findSlot(p11, settings);
      const session = p11.C_OpenSession(slot, pkcs11.CKF_SERIAL_SESSION | pkcs11.CKF_RW_SESSION);
      try {
        p11.C_Login(session, pkcs11.CKU_USER, settings.pin);
      } catch (cause) {
        if (returnCode(cause) !== "CKR_USER_ALREADY_LOGGED_IN") {
          p11.C_CloseSession(session);
          throw new AuthError(`PKCS#11 login failed: ${returnCode(cause)}`, { ...evidence, slotId: slotIdOf(slot) }, { cause });
        }
      }
      return new Pkcs11Token(pkcs11, p11, settings.modulePath, slotIdOf(slot), session);
    } catch (error) {
      if (initialized) p11.C_Finalize();
      p11.close();
      if (error instanceof AuthError || error instanceof NotFoundError) throw error;
      throw new UnavailableError(`PKCS#11 token does not open: ${returnCode(error)}`, evidence, { cause: error });
    }
  }

  static #findSlot(p11: Pkcs11, settings: Pkcs11TokenSettings): Handle {
    const slots = p11.C_GetSlotList(true);
    const labels: string[] = [];
    for (const slot of slots) {
      if (settings.slotId !== null) {
        if (slotIdOf(slot) === settings.slotId) return slot;
        continue;
      }
      const label = p11.C_GetTokenInfo(slot).label.trim();
      labels.push(label);
      if (label === settings.tokenLabel) return slot;
    }
    throw new NotFoundError(settings.slotId === null ? `no PKCS#11 token labelled "${settings.tokenLabel}"` : `no PKCS#11 token in slot ${settings.slotId}`, {
      module: settings.modulePath,
      slots: slots.map(slotIdOf),
      tokenLabels: labels,
    });
  }

  /** Whether close() has not been called. */
  get isOpen(): boolean {
    return this.#session !== null;
  }

  #openSession(): Handle {
    if (this.#session === null) throw new UnavailableError("PKCS#11 token is closed", { module: this.modulePath, slotId: this.slotId });
    return this.#session;
  }

  /** Handles of the objects of `objectClass` labelled `label` (at most MAX_OBJECTS_PER_LABEL). */
  #objects(objectClass: number, label: string): Handle[] {
    const session = this.#openSession();
    const p11 = this.#p11;
    p11.C_FindObjectsInit(session, [
      { type: this.#pkcs11.CKA_CLASS, value: objectClass },
      { type: this.#pkcs11.CKA_LABEL, value: label },
    ]);
    try {
      return p11.C_FindObjects(session, MAX_OBJECTS_PER_LABEL);
    } finally {
      p11.C_FindObjectsFinal(session);
    }
  }

  /** Whether any object is labelled `label` (provisioning refuses to add a second pair under one label). */
  hasLabel(label: string): boolean {
    return this.#objects(this.#pkcs11.CKO_PRIVATE_KEY, label).length > 0 || this.#objects(this.#pkcs11.CKO_PUBLIC_KEY, label).length > 0;
  }

  /**
   * Generates a token-resident EC key pair on `curve` under `label`: the private key sensitive, non-extractable and
   * for signing only. Refuses a label already in use (NotFoundError's opposite: ValidationError naming it).
   */
  generateKeyPair(label: string, curve: TokenCurve): TokenKeyPair {
    const pkcs11 = this.#pkcs11;
    if (this.hasLabel(label)) throw new ValidationError("label", `PKCS#11 token already holds a key labelled "${label}"`, { slotId: this.slotId, label });
    const id = Buffer.from(label, "utf8");
    try {
      this.#p11.C_GenerateKeyPair(
        this.#openSession(),
        { mechanism: pkcs11.CKM_EC_KEY_PAIR_GEN },
        [
          { type: pkcs11.CKA_TOKEN, value: true },
          { type: pkcs11.CKA_EC_PARAMS, value: EC_PARAMS_DER[curve] },
          { type: pkcs11.CKA_VERIFY, value: true },
          { type: pkcs11.CKA_LABEL, value: label },
          { type: pkcs11.CKA_ID, value: id },
        ],
        [
          { type: pkcs11.CKA_TOKEN, value: true },
          { type: pkcs11.CKA_PRIVATE, value: true },
          { type: pkcs11.CKA_SIGN, value: true },
          { type: pkcs11.CKA_SENSITIVE, value: true },
          { type: pkcs11.CKA_EXTRACTABLE, value: false },
          { type: pkcs11.CKA_LABEL, value: label },
          { type: pkcs11.CKA_ID, value: id },
        ],
      );
    } catch (cause) {
      throw new UnavailableError(`PKCS#11 key generation failed: ${returnCode(cause)}`, { module: this.modulePath, slotId: this.slotId, label, curve }, { cause });
    }
    return this.keyPair(label, curve);
  }

  /**
   * The key pair labelled `label` on `curve`: exactly one private and one public object, the curve as expected, the
   * private key sensitive and non-extractable.
   */
  keyPair(label: string, curve: TokenCurve): TokenKeyPair {
    const pkcs11 = this.#pkcs11;
    const evidence = { module: this.modulePath, slotId: this.slotId, label, curve };
    const privateKeys = this.#objects(pkcs11.CKO_PRIVATE_KEY, label);
    const publicKeys = this.#objects(pkcs11.CKO_PUBLIC_KEY, label);
    if (privateKeys.length !== 1 || publicKeys.length !== 1) {
      throw new NotFoundError(`PKCS#11 token must hold exactly one private and one public key labelled "${label}"`, {
        ...evidence,
        privateKeys: privateKeys.length,
        publicKeys: publicKeys.length,
      });
    }
    const session = this.#openSession();
    const [params, point] = this.#p11.C_GetAttributeValue(session, publicKeys[0]!, [{ type: pkcs11.CKA_EC_PARAMS }, { type: pkcs11.CKA_EC_POINT }]);
    const ecParams = params?.value;
    if (!(ecParams instanceof Buffer) || !ecParams.equals(EC_PARAMS_DER[curve])) {
      throw new ValidationError("label", `PKCS#11 key "${label}" is not on ${curve}`, { ...evidence, ecParams: ecParams instanceof Buffer ? ecParams.toString("hex") : null });
    }
    if (!(point?.value instanceof Buffer)) throw new ValidationError("label", `PKCS#11 public key "${label}" has no CKA_EC_POINT`, evidence);
    const protection = this.#protectionOf(privateKeys[0]!);
    if (protection.extractable || !protection.sensitive || protection.valueReadable) {
      throw new AuthError(`PKCS#11 key "${label}" can leave the token (it must be sensitive and non-extractable)`, { ...evidence, ...protection });
    }
    return { label, curve, privateKey: privateKeys[0]!, publicKey: ecPointFromAttribute(point.value) };
  }

  /** The private key's CKA_EXTRACTABLE and CKA_SENSITIVE, and whether its CKA_VALUE can be read. */
  protection(pair: TokenKeyPair): TokenKeyProtection {
    return this.#protectionOf(pair.privateKey);
  }

  #protectionOf(privateKey: Handle): TokenKeyProtection {
    const pkcs11 = this.#pkcs11;
    const session = this.#openSession();
    const [extractable, sensitive] = this.#p11.C_GetAttributeValue(session, privateKey, [{ type: pkcs11.CKA_EXTRACTABLE }, { type: pkcs11.CKA_SENSITIVE }]);
    let valueReadable: boolean;
    try {
      const [value] = this.#p11.C_GetAttributeValue(session, privateKey, [{ type: pkcs11.CKA_VALUE }]);
      valueReadable = value?.value instanceof Buffer && value.value.length > 0;
    } catch {
      valueReadable = false; // CKR_ATTRIBUTE_SENSITIVE: what a protected key answers
    }
    const flag = (attribute: { value?: unknown } | undefined): boolean => attribute?.value instanceof Buffer && attribute.value[0] === 1;
    return { extractable: flag(extractable), sensitive: flag(sensitive), valueReadable };
  }

  /** CKM_ECDSA over `digest` (the token hashes nothing): the 64-byte r ‖ s, s as the token made it (either half). */
  signDigest(pair: TokenKeyPair, digest: Uint8Array): Buffer {
    const session = this.#openSession();
    try {
      this.#p11.C_SignInit(session, { mechanism: this.#pkcs11.CKM_ECDSA }, pair.privateKey);
      // 72 bytes: room for a module that answers DER instead of raw r ‖ s (rawSignatureFromToken reads both).
      return rawSignatureFromToken(this.#p11.C_Sign(session, Buffer.from(digest), Buffer.alloc(72)));
    } catch (cause) {
      throw new UnavailableError(`PKCS#11 signature failed: ${returnCode(cause)}`, { module: this.modulePath, slotId: this.slotId, label: pair.label }, { cause });
    }
  }

  /** Logs out, closes the session and unloads the module. Idempotent. */
  close(): void {
    const session = this.#session;
    if (session === null) return;
    this.#session = null;
    try {
      this.#p11.C_Logout(session);
    } catch {
      // already logged out (another session of this process logged out the token): closing is what matters
    }
    this.#p11.C_CloseSession(session);
    this.#p11.C_Finalize();
    this.#p11.close();
  }
}

/** Open tokens by module, slot and label: one C_Initialize per module and process, as PKCS#11 expects. */
const SHARED_TOKENS = new Map<string, Pkcs11Token>();

/**
 * The process's session on the token `settings` names, opened on first use and kept until closeSharedTokens():
 * the card key and the node key share it, and a node restarted in the same process finds it open (a second
 * C_Initialize of one module fails). The node never closes it: the session ends with the process.
 */
export function sharedToken(settings: Pkcs11TokenSettings): Pkcs11Token {
  const key = `${settings.modulePath}\u0000${settings.slotId ?? ""}\u0000${settings.tokenLabel}`;
  const open = SHARED_TOKENS.get(key);
  if (open !== undefined && open.isOpen) return open;
  const token = Pkcs11Token.open(settings);
  SHARED_TOKENS.set(key, token);
  return token;
}

/** Closes every shared token (the CLI before it exits, tests). */
export function closeSharedTokens(): void {
  for (const token of SHARED_TOKENS.values()) token.close();
  SHARED_TOKENS.clear();
}
