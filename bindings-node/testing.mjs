// `etcdlock/testing` as an ES module: the same functions as testing.js.
import cjs from './testing.js';

export const { memStore, withMemStore, MemFixture } = cjs;
export default cjs;
