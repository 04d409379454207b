// Lint: the type-aware checks that catch what tsc does not (a promise nobody awaits or handles, a
// promise where a callback's result is ignored, a switch over a union that misses a member).
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'dist-test/**', 'node_modules/**', 'src/sandbox/isolate/**', '.scratch/**', 'cluster-data/**', 'data/**'] },
  {
    files: ['src/**/*.ts', 'test/**/*.ts', 'console/src/**/*.ts'],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: {
        project: ['./tsconfig.json', './tsconfig.test.json', './console/tsconfig.json'],
        tsconfigRootDir: import.meta.dirname,
      },
    },
    plugins: { '@typescript-eslint': tseslint.plugin },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // tap's t.test() returns a promise tap itself waits for
      '@typescript-eslint/no-floating-promises': [
        'error',
        { allowForKnownSafeCalls: [{ from: 'package', package: '@tapjs/test', name: ['test', 'skip', 'todo', 'only'] }] },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/no-implied-eval': 'error',
      'no-control-regex': 'error',
    },
  },
);
