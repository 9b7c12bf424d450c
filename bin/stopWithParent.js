"use strict";
// Preloaded (`node -r bin/stopWithParent.js …`) into the child processes of the local network and of
// `ats-node cluster`, spawned with an IPC channel: when the parent dies (SIGKILL, a crash), the channel closes and
// the child sends itself SIGTERM, which the programs answer with their graceful stop (a program still starting,
// or Hardhat, simply exits). Without a channel it does nothing. The channel never keeps the child alive.
if (process.channel !== undefined && process.channel !== null) {
  process.channel.unref();
  process.once("disconnect", () => process.kill(process.pid, "SIGTERM"));
}
