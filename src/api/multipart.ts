import busboy from 'busboy';
import { invalidParameter } from '../domain/errors.js';

interface MultipartFile {
  field: string;
  filename: string | undefined;
  mimeType: string;
  data: Buffer;
  /** More than `maxFileBytes` arrived; `data` holds only the first `maxFileBytes`. */
  truncated: boolean;
}

interface MultipartForm {
  /** Every value of every plain field, in order. */
  fields: Map<string, string[]>;
  files: MultipartFile[];
}

interface MultipartLimits {
  maxFileBytes: number;
  maxFiles: number;
  maxFields: number;
  maxFieldBytes: number;
}

/**
 * Parses a `multipart/form-data` body that is already in memory (the front end reads bodies whole).
 * A body that is not multipart, is cut off, or has more parts than allowed is a 400 naming `body`.
 * An oversized file is not an error here: it comes back with `truncated` so the caller picks the status.
 */
export const parseMultipart = (body: Buffer, contentType: string | undefined, limits: MultipartLimits): Promise<MultipartForm> => {
  if (!contentType || !/^multipart\/form-data\s*;/i.test(contentType)) {
    return Promise.reject(invalidParameter('body', 'the upload must be multipart/form-data'));
  }
  let parser: busboy.Busboy;
  try {
    parser = busboy({
      headers: { 'content-type': contentType },
      limits: {
        fileSize: limits.maxFileBytes,
        files: limits.maxFiles,
        fields: limits.maxFields,
        fieldSize: limits.maxFieldBytes,
        parts: limits.maxFiles + limits.maxFields,
      },
    });
  } catch (error) {
    return Promise.reject(invalidParameter('body', `the upload is not valid multipart/form-data: ${(error as Error).message}`));
  }
  return new Promise<MultipartForm>((resolve, reject) => {
    const fields = new Map<string, string[]>();
    const files: MultipartFile[] = [];
    let failed = false;
    const fail = (message: string) => {
      if (failed) return;
      failed = true;
      reject(invalidParameter('body', message));
    };
    parser.on('field', (name, value, info) => {
      if (info.valueTruncated) return fail(`the form field ${name} is longer than ${limits.maxFieldBytes} bytes`);
      const values = fields.get(name) ?? [];
      values.push(value);
      fields.set(name, values);
    });
    parser.on('file', (field, stream, info) => {
      const chunks: Buffer[] = [];
      const file: MultipartFile = { field, filename: info.filename, mimeType: info.mimeType, data: Buffer.alloc(0), truncated: false };
      files.push(file);
      // A body cut off inside a file part errors the file's stream (as well as the parser): unheard,
      // that error would be thrown as an uncaught exception and end the node.
      stream.on('error', (error: Error) => fail(`the upload is not valid multipart/form-data: ${error.message}`));
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('limit', () => {
        file.truncated = true;
      });
      stream.on('end', () => {
        file.data = Buffer.concat(chunks);
      });
    });
    parser.on('filesLimit', () => fail(`the upload may carry at most ${limits.maxFiles} file(s)`));
    parser.on('fieldsLimit', () => fail(`the upload may carry at most ${limits.maxFields} fields`));
    parser.on('partsLimit', () => fail('the upload has too many parts'));
    parser.on('error', (error: Error) => fail(`the upload is not valid multipart/form-data: ${error.message}`));
    parser.on('close', () => {
      if (!failed) resolve({ fields, files });
    });
    try {
      parser.end(body);
    } catch (error) {
      fail(`the upload is not valid multipart/form-data: ${(error as Error).message}`);
    }
  });
};
