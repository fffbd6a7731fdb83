/** The notebook type and cell language the manifest declares (package.json `contributes`). */
export const NOTEBOOK_TYPE = 'inflab';
export const CELL_LANGUAGE = 'inflab';
