// SPDX-License-Identifier: MIT
// Floating: dApps compile this file with their own compiler, 0.8.24 or later (test/contracts/pragma.test.ts).
// solhint-disable-next-line compiler-version
pragma solidity ^0.8.24;

/**
 * @title AccuracyTiers
 * @notice Named accuracy bounds (ns) for {TimeConsumer}'s constructor: the largest signed `accuracy` a consumer
 * accepts is its own choice, and these name what each kind of network can honestly sign (docs/protocol.md §6.7 has
 * the table with the measured figures). A proof's `accuracy` is an error bound its signers stand behind, so a
 * consumer that demands less than its network can prove refuses every proof that network makes.
 */
library AccuracyTiers {
    /**
     * @notice 100 ns: a network whose card clocks are hardware-timestamped (PTP-capable NICs, a GPS/PPS-disciplined
     * time card). Commodity software clocks never sign this little: a consumer with this bound refuses their proofs.
     */
    uint32 internal constant HARDWARE_TIMESTAMPED_NS = 100;

    /**
     * @notice 10 ms: a mesh of software clocks on commodity hosts, the local network's loopback mesh included. Its
     * bound is half a measured round trip through kernels and event loops plus the card's accuracy, ~0.1–0.2 ms on
     * loopback and milliseconds while the cores are busy; 10 ms is also what the local network's oracle accepts
     * (`maxAcceptableDrift`).
     */
    uint32 internal constant SOFTWARE_MESH_NS = 10_000_000;
}
