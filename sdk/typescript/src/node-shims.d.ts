// The few Node built-ins the SDK uses, declared here so that the package
// needs no @types/node. Only loaded on Node (and runtimes that offer the
// node: modules); never part of the public types.

declare module "node:crypto" {
  export interface KeyObject {
    export(options: { format: "der"; type: "spki" | "pkcs8" }): Uint8Array;
  }
  export function createPrivateKey(options: { key: Uint8Array; format: "der"; type: "pkcs8" }): KeyObject;
  export function createPublicKey(key: KeyObject | { key: Uint8Array; format: "der"; type: "spki" }): KeyObject;
  export function sign(algorithm: null, data: Uint8Array, key: KeyObject): Uint8Array;
  export function verify(algorithm: null, data: Uint8Array, key: KeyObject, signature: Uint8Array): boolean;
  export function createHash(algorithm: string): { update(data: Uint8Array): { digest(): Uint8Array } };
  export function randomBytes(size: number): Uint8Array;
}

declare module "node:fs/promises" {
  export function readFile(path: string, encoding: "utf8"): Promise<string>;
  export function writeFile(path: string, data: string, options: { mode: number; flag: string }): Promise<void>;
  export function mkdir(path: string, options: { recursive?: boolean; mode: number }): Promise<string | undefined>;
  export function chmod(path: string, mode: number): Promise<void>;
  export function rename(from: string, to: string): Promise<void>;
  export function rm(path: string, options: { force: boolean }): Promise<void>;
  export function readdir(path: string, options: { withFileTypes: true }): Promise<Array<{ name: string; isDirectory(): boolean }>>;
  export function stat(path: string): Promise<{ isFile(): boolean }>;
  export function open(path: string, flags: string): Promise<{ sync(): Promise<void>; close(): Promise<void> }>;
}

declare module "node:os" {
  export function homedir(): string;
}

declare module "node:path" {
  export function join(...parts: string[]): string;
  export function dirname(path: string): string;
}

declare const process: { env: Record<string, string | undefined>; versions: Record<string, string | undefined> } | undefined;
