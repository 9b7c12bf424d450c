/**
 * Version order for "never downgrade": MAJOR.MINOR.PATCH compared numerically; a pre-release (1.2.0-rc.1) sorts
 * before its release, and two pre-releases of one version compare by their text. Enough for this package's
 * versions; anything else is refused by the metadata schema before it gets here.
 */
export function compareVersions(a: string, b: string): number {
  const [coreA = "", preA] = a.split("-", 2) as [string, string | undefined];
  const [coreB = "", preB] = b.split("-", 2) as [string, string | undefined];
  const partsA = coreA.split(".").map(Number);
  const partsB = coreB.split(".").map(Number);
  for (let index = 0; index < 3; index++) {
    const difference = (partsA[index] ?? 0) - (partsB[index] ?? 0);
    if (difference !== 0) return Math.sign(difference);
  }
  if (preA === preB) return 0;
  if (preA === undefined) return 1;
  if (preB === undefined) return -1;
  return preA < preB ? -1 : 1;
}
