/** The protocol package: the one TypeScript implementation of the Attested Time wire format (docs/protocol.md). */
export * from "./constants";
export * from "./types";
export * from "./errors";
export * from "./codec";
export * from "./keys";
export * from "./secp256k1";
export * from "./keccak";
export * from "./sign";
export * from "./verify";
export * from "./devca";
export * from "./json";
export * from "./certs";
export * from "./keystore";
export * from "./evidence";
// The public development keys (./devkeys) are not re-exported: code that signs with them imports them by path,
// so a production import of the package can never pick them up by accident.
