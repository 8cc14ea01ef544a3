// `etcdlock/fencing` as an ES module: the same values as fencing.js.
import cjs from './fencing.js';

export const { TABLE, CREATE_TABLE, StaleTokenError, fence, fenceSql } = cjs;
export default cjs;
