/** Absolute path of the built console (index.html and assets/), with a trailing slash. */
export declare const consoleDir: string;
