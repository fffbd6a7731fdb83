export class UsageError extends Error {}
