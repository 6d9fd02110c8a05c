// eslint: the recommended rules of eslint and typescript-eslint.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "node_modules/", "media/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
);
