import { UsageError } from '../usage';

export async function auditCommand(_argv: string[]): Promise<number> {
  throw new UsageError('"inflab audit" is not built yet');
}
