import { ServiceError, type Session, type SessionStorage } from '@svc/contracts';
import type { Selectable } from 'kysely';
import { iso, isoRequired } from '../../store/json.js';
import type { SessionsTable } from '../../store/schema.js';

export type SessionRow = Selectable<SessionsTable>;

export const sessionPath = (sessionId: string) => `/api/v1/sessions/${sessionId}`;

export function storageOf(row: SessionRow): SessionStorage {
  return {
    storageKind: row.storage_kind as SessionStorage['storageKind'],
    pvcName: row.pvc_name,
    pvcNamespace: row.pvc_namespace,
    pvcPhase: row.storage_kind === 'evicted' ? null : row.pvc_phase,
    storage_size_bytes: row.storage_size_bytes === null ? null : Number(row.storage_size_bytes),
    storage_files_count: row.storage_files_count,
    storage_sha256: row.storage_sha256,
    storage_updated_at: iso(row.storage_updated_at),
    storage_evicted_at: iso(row.storage_evicted_at),
    expires_at: isoRequired(row.expires_at),
    valuesPrinted: false,
  };
}

/** Row -> projection. Never a key, auth.json, config.toml or agent home: none is stored. */
export function toSession(
  row: SessionRow,
  reader: { readerId: string; readVersion: number | null } | null,
): Session {
  return {
    sessionId: row.session_id,
    sessionPath: sessionPath(row.session_id),
    conversationId: row.conversation_id,
    threadId: row.thread_id,
    backendProfile: row.backend_profile,
    tenantId: row.tenant_id,
    projectId: row.project_id,
    executionState: row.execution_state as Session['executionState'],
    activeRunId: row.active_run_id,
    activeCommandId: row.active_command_id,
    lastRunId: row.last_run_id,
    lastCommandId: row.last_command_id,
    lastOutcome: row.last_outcome,
    version: row.version,
    reader: reader
      ? {
          readerId: reader.readerId,
          readVersion: reader.readVersion,
          unread: reader.readVersion === null || reader.readVersion < row.version,
        }
      : null,
    storage: storageOf(row),
    createdAt: isoRequired(row.created_at),
    updatedAt: isoRequired(row.updated_at),
  };
}

/** Keyset cursor over (updated_at desc, session_id desc), opaque to clients. */
export function encodeCursor(row: Pick<SessionRow, 'updated_at' | 'session_id'>): string {
  return Buffer.from(JSON.stringify([isoRequired(row.updated_at), row.session_id])).toString(
    'base64url',
  );
}

export function decodeCursor(cursor: string): { updatedAt: Date; sessionId: string } {
  try {
    const [updatedAt, sessionId] = JSON.parse(
      Buffer.from(cursor, 'base64url').toString('utf8'),
    ) as [string, string];
    const date = new Date(updatedAt);
    if (typeof sessionId !== 'string' || Number.isNaN(date.getTime())) throw new Error('bad');
    return { updatedAt: date, sessionId };
  } catch {
    throw new ServiceError('schema-invalid', 'cursor is not a cursor this service returned', {
      field: 'cursor',
    });
  }
}
