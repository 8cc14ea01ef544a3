export interface TlsOptions {
  ca?: string;
  cert?: string;
  key?: string;
  domain?: string;
}
export interface ConnectOptions {
  endpoints?: string[] | string;
  ttl?: number;
  namespace?: string;
  username?: string;
  password?: string;
  tls?: TlsOptions;
  connectTimeout?: number;
  requestTimeout?: number;
  releaseOnExit?: boolean;
  margin?: number;
  watchHeldKeys?: boolean;
  keepaliveInterval?: number;
  lazyConnect?: boolean;
  logger?: Logger;
  logLevel?: LogLevel;
  tracerProvider?: TracerProviderLike;
}
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';
export interface Logger {
  debug?(message: string, fields: LogFields): unknown;
  info?(message: string, fields: LogFields): unknown;
  warn?(message: string, fields: LogFields): unknown;
  error?(message: string, fields: LogFields): unknown;
  level?: string;
}
export interface LogFields {
  target: string;
  [field: string]: string;
}
export interface TracerProviderLike {
  getTracer(name: string, version?: string, options?: object): unknown;
}
export interface LockOptions {
  timeout?: number;
  signal?: AbortSignal;
}
export interface AcquireOptions {
  lockDelay?: number;
  leaseTime?: number;
  metadata?: Record<string, string>;
  detectDeadlock?: boolean;
}
export interface LockAcquireOptions extends LockOptions, AcquireOptions {}
export interface ReentrantOption {
  reentrant?: boolean;
}
export interface WaitOptions {
  timeout?: number;
  signal?: AbortSignal;
}
