// The lab's address plan: which loopback addresses, alias addresses and etcd ports one lab uses.
// A lab holds a slot (harness/lab/slots.ts hands them out, one per running lab on the machine);
// no two slots share an address or a port, so any two labs — two cluster test files, or a test
// beside `skewgate-lab lab up` (slot 0) — run side by side. Pure.

/** Slot 0 is `skewgate-lab lab up`'s (127.0.0.1-16, 10.213.0.N, etcd 23790/23800); tests claim 1…MAX. */
export const LAB_MAX_SLOT = 15;
/** Addresses per slot and kind: the lab's serving certificate names each of a slot's loopback ones. */
export const LAB_ADDRESSES_PER_SLOT = 16;
/** Alias addresses (net.ts adds them to lo): 10.213.<slot>.N, all of 10.213.0.0/16 the lab's. */
export const LAB_ALIAS_NET = '10.213.';

export interface LabAddresses {
  readonly slot: number;
  /** etcd's client and peer ports on 127.0.0.1. */
  readonly etcdClientPort: number;
  readonly etcdPeerPort: number;
  /** The slot's n-th loopback address (n in 1…16): 127.0.<slot>.n. */
  loopback(n: number): string;
  /** The slot's n-th alias address (n in 1…16): 10.213.<slot>.n, not 127/8 (an Endpoints address). */
  alias(n: number): string;
  /**
   * The serving certificate's IP SANs for the slot's loopback and alias addresses: as kubeadm's
   * apiserver.crt names each apiserver's advertise address, a client of an apiserver placed on an
   * alias address can check it by that address (a config as an operator writes it).
   */
  readonly sans: readonly string[];
}

export function labAddresses(slot: number): LabAddresses {
  if (!Number.isInteger(slot) || slot < 0 || slot > LAB_MAX_SLOT) throw new RangeError(`lab slot ${slot}: 0…${LAB_MAX_SLOT}`);
  const nth = (n: number): number => {
    if (!Number.isInteger(n) || n < 1 || n > LAB_ADDRESSES_PER_SLOT) throw new RangeError(`lab address ${n}: 1…${LAB_ADDRESSES_PER_SLOT}`);
    return n;
  };
  const loopback = (n: number): string => `127.0.${slot}.${nth(n)}`;
  return {
    slot,
    // Slot 0 keeps the ports `lab up` always had; the others step by 2 from 24000.
    etcdClientPort: slot === 0 ? 23790 : 24000 + 2 * slot,
    etcdPeerPort: slot === 0 ? 23800 : 24001 + 2 * slot,
    loopback,
    alias: (n) => `${LAB_ALIAS_NET}${slot}.${nth(n)}`,
    sans: Array.from({ length: LAB_ADDRESSES_PER_SLOT }, (_, i) => [`IP:${loopback(i + 1)}`, `IP:${LAB_ALIAS_NET}${slot}.${i + 1}`]).flat(),
  };
}

/** Whether ip is one of the lab's alias addresses (any slot). */
export function isLabAlias(ip: string): boolean {
  return ip.startsWith(LAB_ALIAS_NET);
}
